"""A cell whose database server stops, with every service its own process
(PostgreSQL, RabbitMQ; see ``deploy.py``). cell2's database lives in a
PostgreSQL cluster the test owns (``pgcluster``), stopped and started
again while everything keeps running:

* while it is down the compute API lists every server (2.69: cell2's with
  status UNKNOWN; 2.68: without them), shows a cell2 server's partial body,
  lists cell2's compute as UNKNOWN and refuses actions on cell2's servers
  with a 503; new servers are built in cell1 and none is left in BUILD or
  holds a claim it does not use;
* once it is back every process, none restarted, serves cell2 again; after
  deleting every server Placement holds nothing.
"""
from __future__ import annotations

import time

import pytest

from tests.e2e import pgcluster
from tests.e2e.deploy import ADMIN, Deployment, http_json
from tests.e2e.test_distributed import allocations, boot, create_flavor

pytestmark = pytest.mark.slow

V68 = {**ADMIN, "OpenStack-API-Version": "compute 2.68"}
V69 = {**ADMIN, "OpenStack-API-Version": "compute 2.69"}


@pytest.fixture
def own_cluster():
    if not pgcluster.available():
        pytest.skip("no PostgreSQL server binaries to run a cluster of the test's own")
    cluster = pgcluster.OwnCluster()
    cluster.start()
    yield cluster
    cluster.destroy()


def api(d: Deployment, method: str, path: str, body=None, headers=ADMIN) -> tuple[int, dict, float]:
    began = time.monotonic()
    status, data, _ = http_json(d.api_url, method, path, body, headers=headers, timeout=60)
    return status, data, time.monotonic() - began


def listing(d: Deployment, headers=V69, path: str = "/v2.1/servers/detail") -> dict[str, dict]:
    status, data, _ = api(d, "GET", path, headers=headers)
    assert status == 200, data
    return {s["id"]: s for s in data["servers"]}


def boot_on(d: Deployment, host: str, name: str) -> str:
    status, data, _ = api(d, "POST", "/v2.1/servers", {"server": {
        "name": name, "flavorRef": "1", "imageRef": "cirros", "networks": "none",
        "availability_zone": f"nova:{host}"}})
    assert status == 202, data
    return data["server"]["id"]


def statuses(d: Deployment, uuids) -> dict[str, str]:
    found = listing(d)
    return {u: found[u]["status"] if u in found else "MISSING" for u in uuids}


def all_in(d: Deployment, uuids, wanted: set[str]):
    now = statuses(d, uuids)
    return now if set(now.values()) <= wanted else None


def test_a_cell_whose_database_stops_and_comes_back(deployment_factory, own_cluster):
    d = deployment_factory({"cell1": ("c1-a", "c1-b"), "cell2": ("c2-a",)})
    cell1, cell2 = d.cells
    cell2.db = own_cluster.create_database("cell2")
    d.startup_timeout = max(d.startup_timeout, 300.0)  # (seven processes start at once)
    d.register()
    d.start_placement()
    for cell in d.cells:
        d.start_conductor(cell, wait=False)
    # cell2's host has the most memory: the scheduler's first choice while it believes the host is up.
    d.start_compute(cell1, "c1-a", build_time=0.2, failure_rate=0, wait=False)
    d.start_compute(cell1, "c1-b", build_time=0.2, failure_rate=0, wait=False)
    d.start_compute(cell2, "c2-a", build_time=0.2, failure_rate=0, memory_mb=262144, wait=False)
    for cell in d.cells:
        d.procs[f"conductor-{cell.name}"].wait_for_line(f"serving cell {cell.name}", d.startup_timeout)
    for host in ("c1-a", "c1-b", "c2-a"):
        d.procs[f"compute-{host}"].wait_for_line(f"compute {host} serving", d.startup_timeout)
    d.start_control_plane(schedulers=1, super_conductors=1)
    create_flavor(d)

    in_cell1 = [boot_on(d, "c1-a", "one")]
    in_cell2 = [boot_on(d, "c2-a", "two"), boot_on(d, "c2-a", "three")]
    d.wait(lambda: all_in(d, in_cell1 + in_cell2, {"ACTIVE"}), timeout=120, what="the first servers ACTIVE")

    own_cluster.stop()
    # At once, before the scheduler's host records say anything: these may
    # first be handed to cell2 and must end in cell1 all the same.
    during = [boot(d, f"during-{i}") for i in range(3)]
    d.wait(lambda: all_in(d, during, {"ACTIVE"}), timeout=120,
           what="servers asked for while cell2 is down to be ACTIVE in cell1")
    for uuid in during:
        held = allocations(d, uuid)
        assert len(held) == 1, (uuid, held)
    names = {rp["uuid"]: rp["name"] for rp in d.placement("GET", "/resource_providers")[1]["resource_providers"]}
    assert {names[rp] for u in during for rp in allocations(d, u)} <= {"c1-a", "c1-b"}

    slowest = 0.0
    for _ in range(3):
        status, data, took = api(d, "GET", "/v2.1/servers/detail", headers=V69)
        assert status == 200, data
        slowest = max(slowest, took)
    found = listing(d)
    assert set(found) >= set(in_cell1 + in_cell2 + during)
    for uuid in in_cell2:
        assert found[uuid]["status"] == "UNKNOWN" and found[uuid]["tenant_id"] == "admin", found[uuid]
        assert found[uuid]["flavor"]["original_name"] == "small" and found[uuid]["image"]["id"] == "cirros"
    for uuid in in_cell1 + during:
        assert found[uuid]["status"] == "ACTIVE", found[uuid]
    old = listing(d, V68)
    assert not set(in_cell2) & set(old) and set(old) >= set(in_cell1 + during)
    assert set(listing(d, V69, "/v2.1/servers")) >= set(in_cell2)

    status, data, _ = api(d, "GET", f"/v2.1/servers/{in_cell2[0]}", headers=V69)
    assert status == 200 and data["server"]["status"] == "UNKNOWN", data
    status, data, _ = api(d, "GET", f"/v2.1/servers/{in_cell2[0]}", headers=V68)
    assert status == 503 and "cell2" in data["serviceUnavailable"]["message"], data

    status, data, _ = api(d, "GET", "/v2.1/os-services", headers=V69)
    assert status == 200, data
    services = {(s["host"], s["binary"]): s["status"] for s in data["services"]}
    assert services[("c2-a", "nova-compute")] == "UNKNOWN" and services[("c1-a", "nova-compute")] == "enabled"

    for method, path, body in (("POST", f"/v2.1/servers/{in_cell2[0]}/action", {"migrate": None}),
                               ("DELETE", f"/v2.1/servers/{in_cell2[1]}", None)):
        status, data, _ = api(d, method, path, body, headers=V69)
        assert status == 503 and "cell2" in data["serviceUnavailable"]["message"], (method, data)

    # Asked for cell2's host: nowhere else it may go. ERROR with a fault, no claim.
    forced = boot_on(d, "c2-a", "forced")
    d.wait(lambda: all_in(d, [forced], {"ERROR"}), timeout=60, what="a build for cell2's host to end in ERROR")
    status, data, _ = api(d, "GET", f"/v2.1/servers/{forced}")
    assert data["server"].get("fault", {}).get("message"), data
    assert allocations(d, forced) == {}
    print(f"while cell2 was down: slowest listing {slowest:.2f} s")

    own_cluster.start()
    d.wait(lambda: all_in(d, in_cell2, {"ACTIVE"}), timeout=60, what="cell2's servers shown again")
    status, data, _ = api(d, "GET", "/v2.1/os-services", headers=V69)
    assert {s["status"] for s in data["services"] if s["host"] == "c2-a"} == {"enabled"}, data
    # The scheduler sees the host up again at its next refresh of host
    # records after the cell's skip window: until then a build for that host
    # may end in ERROR (no valid host), which is truthful. Within a minute one
    # must be ACTIVE there.
    tried: list[str] = []
    deadline = time.monotonic() + 60
    while True:
        tried.append(boot_on(d, "c2-a", f"after-{len(tried)}"))
        now = d.wait(lambda: all_in(d, tried[-1:], {"ACTIVE", "ERROR"}), timeout=120, what="a build to settle")
        if now[tried[-1]] == "ACTIVE":
            break
        assert time.monotonic() < deadline, f"no server was built in cell2 once it was back\n{d.logs()}"
        time.sleep(2)
    print(f"builds for cell2's host once it was back: {len(tried)} ({len(tried) - 1} in ERROR first)")
    assert all(p.alive() for p in d.procs.values()), d.logs()

    everything = in_cell1 + in_cell2 + during + [forced, *tried]
    for uuid in everything:
        status, data, _ = api(d, "DELETE", f"/v2.1/servers/{uuid}")
        assert status == 204, (uuid, data)
    d.wait(lambda: not set(everything) & set(listing(d)), timeout=120, what="every server deleted")
    d.wait(lambda: not any(d.usages().values()), timeout=60, what="Placement usages back to zero")
