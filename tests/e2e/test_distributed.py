"""Billeting distributed: every service its own process on PostgreSQL and
RabbitMQ (see ``deploy.py``), driven through the compute API over HTTP.

* 100 servers requested at once on 2 cells x 3 computes that fail 20% of
  their builds: every server ends ACTIVE or ERROR with a fault; the
  schedulers were called once per request (retries stayed in the cells);
  Placement holds exactly the ACTIVE servers' flavors; after deleting them
  all it holds nothing.
* A compute killed with SIGKILL mid-build, and a cell conductor killed while
  it holds a reschedule: the instances end ACTIVE elsewhere. A super
  conductor killed while it holds a request: its restart builds it. RabbitMQ
  dropping every connection: the services reconnect and the next server builds.
* No cell process was given the API database or the API bus.
"""
from __future__ import annotations

import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine

from billeting.cells import instances as inst
from billeting.cli import main

from tests.conftest import _rabbitmqctl
from tests.e2e.deploy import Deployment

pytestmark = pytest.mark.slow

FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SERVERS = 100


def create_flavor(d: Deployment) -> None:
    status, body, _ = d.api("POST", "/v2.1/flavors", {"flavor": {"id": "1", "name": "small", "ram": 512,
                                                                 "vcpus": 1, "disk": 1}})
    assert status == 200, body


def boot(d: Deployment, name: str) -> str:
    status, body, headers = d.api("POST", "/v2.1/servers", {"server": {"name": name, "flavorRef": "1",
                                                                       "imageRef": "cirros", "networks": "none"}})
    assert status == 202, (status, body)
    assert headers.get("location", "").endswith(body["server"]["id"]), headers
    return body["server"]["id"]


def servers(d: Deployment) -> dict[str, dict]:
    status, body, _ = d.api("GET", "/v2.1/servers/detail")
    assert status == 200, body
    return {s["id"]: s for s in body["servers"]}


def server(d: Deployment, uuid: str) -> dict:
    status, body, _ = d.api("GET", f"/v2.1/servers/{uuid}")
    assert status == 200, body
    return body["server"]


def allocations(d: Deployment, uuid: str) -> dict[str, dict[str, int]]:
    status, body = d.placement("GET", f"/allocations/{uuid}")
    assert status == 200, body
    return {rp: a["resources"] for rp, a in body["allocations"].items()}


def provider_names(d: Deployment) -> dict[str, str]:
    status, body = d.placement("GET", "/resource_providers")
    assert status == 200, body
    return {rp["uuid"]: rp["name"] for rp in body["resource_providers"]}


def assert_cells_isolated(d: Deployment) -> None:
    """What the cell processes were started with names no API database or API bus."""
    forbidden = [d.api_db, d.api_bus, d.api_bus.rsplit("/", 1)[1], d.api_db.rsplit("/", 1)[1]]
    cell_procs = [p for p in d.procs.values() if p.role == "cell"]
    assert cell_procs
    for proc in cell_procs:
        seen = " ".join(proc.argv) + " " + " ".join(f"{k}={v}" for k, v in proc.env.items())
        for secret in forbidden:
            assert secret not in seen, f"{proc.name} was started with {secret!r}: {proc.argv}"
        assert not any(k.startswith("BILLETING_") for k in proc.env), proc.env


def settled(d: Deployment, uuids: list[str]):
    found = servers(d)
    missing = [u for u in uuids if u not in found]
    assert not missing, f"servers vanished from the listing: {missing}"
    if all(found[u]["status"] in ("ACTIVE", "ERROR") for u in uuids):
        return found
    return None


def test_a_hundred_servers_on_two_cells_with_failing_builds(deployment_factory):
    began = time.monotonic()
    d = deployment_factory({"cell1": ("c1-a", "c1-b", "c1-c"), "cell2": ("c2-a", "c2-b", "c2-c")})
    d.register()
    d.start_placement()
    for cell in d.cells:
        d.start_conductor(cell, wait=False)
        for host in cell.hosts:
            d.start_compute(cell, host, build_time=0.3, failure_rate=0.2, wait=False)
    for cell in d.cells:
        d.procs[f"conductor-{cell.name}"].wait_for_line(f"serving cell {cell.name}", d.startup_timeout)
        for host in cell.hosts:
            d.procs[f"compute-{host}"].wait_for_line(f"compute {host} serving", d.startup_timeout)
    d.start_control_plane()
    assert_cells_isolated(d)
    create_flavor(d)
    print(f"deployment up after {time.monotonic() - began:.1f} s")

    counter = d.count_connections().__enter__()
    with ThreadPoolExecutor(max_workers=10) as pool:
        uuids = list(pool.map(lambda i: boot(d, f"vm-{i}"), range(SERVERS)))
    assert len(set(uuids)) == SERVERS
    found = d.wait(lambda: settled(d, uuids), timeout=240, what=f"{SERVERS} servers to be ACTIVE or ERROR")
    print(f"{SERVERS} servers settled after {time.monotonic() - began:.1f} s")

    active = [u for u in uuids if found[u]["status"] == "ACTIVE"]
    errors = [u for u in uuids if found[u]["status"] == "ERROR"]
    for uuid in errors:
        fault = server(d, uuid).get("fault")
        assert fault and fault.get("message"), f"{uuid} is in ERROR without a fault: {found[uuid]}\n{d.logs()}"

    # Retries happened, and only inside the cells: one scheduler call per request.
    cell_engines = {c.name: create_engine(c.db) for c in d.cells}
    try:
        records = {}
        for engine in cell_engines.values():
            records.update({r.uuid: r for r in inst.listing(engine)})
    finally:
        for engine in cell_engines.values():
            engine.dispose()
    retried = [u for u in uuids if u in records and records[u].num_attempts > 1]
    calls = {name: p.output().count("select_destinations: 1 instance(s), 2 alternate(s)")
             for name, p in d.procs.items() if name.startswith("scheduler-")}
    print(f"ACTIVE {len(active)}, ERROR {len(errors)}, rescheduled {len(retried)}, scheduler calls {calls}")
    assert retried, f"no build was retried: the failure rate did not act\n{d.logs()}"
    assert sum(calls.values()) == SERVERS, f"scheduler calls {calls} for {SERVERS} requests\n{d.logs()}"

    # The allocation invariant, through Placement's API.
    names = provider_names(d)
    for uuid in active:
        held = allocations(d, uuid)
        assert list(held.values()) == [FLAVOR], (uuid, held)
        assert names[next(iter(held))] == found[uuid]["OS-EXT-SRV-ATTR:host"], (uuid, held, found[uuid])
    for uuid in errors:
        assert allocations(d, uuid) == {}, uuid
    total = {rc: sum(u.get(rc, 0) for u in d.usages().values()) for rc in FLAVOR}
    assert total == {rc: n * len(active) for rc, n in FLAVOR.items()}, (total, len(active))

    # Delete them all: Placement ends empty.
    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = list(pool.map(lambda u: d.api("DELETE", f"/v2.1/servers/{u}")[0], uuids))
    assert set(statuses) == {204}, f"{statuses}\n{d.procs['compute-api'].output()[-8000:]}"
    d.wait(lambda: not servers(d), timeout=120, what="every server to be deleted")
    d.wait(lambda: not any(d.usages().values()), timeout=60, what="Placement usages to drop to zero")
    counter.__exit__(None, None, None)
    print(f"at most {counter.peak} database connections at once")
    cells = [f"{c.name}={c.db}" for c in d.cells] + [f"cell0={d.cell0_db}"]
    assert main(["audit", *[a for c in cells for a in ("--cell", c)], "--placement-url", d.placement_url,
                 "--dry-run"]) == 0
    print(f"done after {time.monotonic() - began:.1f} s")


def unacked(vhost_url: str, suffix: str = "conductor") -> int:
    vhost = vhost_url.rsplit("/", 1)[1]
    out = subprocess.run(["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "messages_unacknowledged"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    total = 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].endswith(suffix) and parts[1].isdigit():
            total += int(parts[1])
    return total


def test_killed_computes_and_conductors_leave_truthful_instances(deployment_factory):
    # cell1: "slow" (the most memory: chosen first) builds for a minute;
    # cell2: "flaky" (next most) fails every build. The steady hosts are the alternates.
    d = deployment_factory({"cell1": ("slow", "steady-a"), "cell2": ("flaky", "steady-b")})
    d.register()
    d.start_placement()
    cell1, cell2 = d.cells
    d.start_conductor(cell1, wait=False)
    d.start_conductor(cell2, wait=False)
    d.start_compute(cell1, "slow", build_time=60, failure_rate=0, memory_mb=131072, wait=False)
    d.start_compute(cell1, "steady-a", build_time=0.3, failure_rate=0, wait=False)
    d.start_compute(cell2, "flaky", build_time=3, failure_rate=1, memory_mb=98304, wait=False)
    d.start_compute(cell2, "steady-b", build_time=0.3, failure_rate=0, wait=False)
    for name in ("conductor-cell1", "conductor-cell2"):
        d.procs[name].wait_for_line("serving cell", d.startup_timeout)
    for host in ("slow", "steady-a", "flaky", "steady-b"):
        d.procs[f"compute-{host}"].wait_for_line(f"compute {host} serving", d.startup_timeout)
    d.start_control_plane(schedulers=1, super_conductors=1)
    assert_cells_isolated(d)
    create_flavor(d)
    cell1_engine, cell2_engine = create_engine(cell1.db), create_engine(cell2.db)
    try:
        # 1. A compute killed mid-build: its cell conductor finds it down and
        #    retries the build on the alternate.
        first = boot(d, "first")
        d.wait(lambda: (r := inst.get(cell1_engine, first)) is not None and r.host == "slow"
               and r.task_state is inst.TaskState.SPAWNING, timeout=60, what="the build to spawn on slow")
        d.procs["compute-slow"].kill()
        shown = d.wait(lambda: (s := server(d, first))["status"] != "BUILD" and s, timeout=60,
                       what="the build killed on slow to settle")
        assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "steady-a"), (shown, d.logs())
        assert [h.host for h in inst.get(cell1_engine, first).hosts_tried] == ["slow", "steady-a"]
        names = provider_names(d)
        assert {names[rp]: r for rp, r in allocations(d, first).items()} == {"steady-a": FLAVOR}
        # slow comes back (building fast now): its recovery leaves the moved instance alone.
        d.start_compute(cell1, "slow", build_time=0.3, failure_rate=0, memory_mb=131072)
        assert server(d, first)["status"] == "ACTIVE"

        # 2. A cell conductor killed while it holds a reschedule: the broker
        #    hands the message to its successor, which finishes it.
        second = boot(d, "second")
        d.wait(lambda: (r := inst.get(cell2_engine, second)) is not None and r.host == "flaky"
               and r.task_state is inst.TaskState.SPAWNING, timeout=60, what="the build to spawn on flaky")
        conductor = d.procs["conductor-cell2"]
        conductor.process.send_signal(signal.SIGSTOP)  # frozen: it takes the message and cannot finish it
        try:
            d.wait(lambda: inst.get(cell2_engine, second).task_state is inst.TaskState.RESCHEDULING, timeout=60,
                   what="flaky's build to fail and ask for a reschedule")
            d.wait(lambda: unacked(cell2.bus) > 0, timeout=30, what="the frozen conductor to hold the reschedule")
        finally:
            conductor.kill()
        assert server(d, second)["status"] == "BUILD"
        d.start_conductor(cell2)
        shown = d.wait(lambda: (s := server(d, second))["status"] != "BUILD" and s, timeout=60,
                       what="the reschedule to finish after the conductor's restart")
        assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "steady-b"), (shown, d.logs())
        record = inst.get(cell2_engine, second)
        assert (record.num_attempts, [h.host for h in record.hosts_tried]) == (2, ["flaky", "steady-b"])
        assert {names[rp]: r for rp, r in allocations(d, second).items()} == {"steady-b": FLAVOR}

        # 3. The super conductor killed while it holds a request (its scheduler
        #    call frozen): the request stays on the API bus, and the restarted
        #    super conductor frees what the dead one's call claimed and builds it.
        scheduler = d.procs["scheduler-1"]
        calls = scheduler.output().count("select_destinations:")
        scheduler.signal_all(signal.SIGSTOP)  # its worker process, which serves the topic, too
        try:
            third = boot(d, "third")
            d.wait(lambda: unacked(d.api_bus, "super_conductor") > 0, timeout=30,
                   what="the super conductor to hold the request")
            d.procs["super-conductor-1"].kill()
        finally:
            scheduler.signal_all(signal.SIGCONT)
        # The scheduler answers the dead one's call (claiming for nobody) ...
        d.wait(lambda: scheduler.output().count("select_destinations:") > calls, timeout=60,
               what="the scheduler to answer the dead super conductor's call")
        assert server(d, third)["status"] == "BUILD"
        d.start_super_conductor(1)
        shown = d.wait(lambda: (s := server(d, third))["status"] != "BUILD" and s, timeout=60,
                       what="the request to finish after the super conductor's restart")
        assert shown["status"] == "ACTIVE", (shown, d.logs())
        assert "redelivered" in d.procs["super-conductor-1"].output()
        third_host = shown["OS-EXT-SRV-ATTR:host"]
        assert {names[rp]: r for rp, r in allocations(d, third).items()} == {third_host: FLAVOR}

        # 4. RabbitMQ drops every connection of every vhost (a broker restart
        #    or failover): every service reconnects by itself and the next
        #    server is built as usual, nothing restarted.
        for bus in (d.api_bus, *(c.bus for c in d.cells)):
            _rabbitmqctl("close_all_connections", "-p", bus.rsplit("/", 1)[1], "test: the broker drops everyone")
        fourth = boot(d, "fourth")
        shown = d.wait(lambda: (s := server(d, fourth))["status"] != "BUILD" and s, timeout=90,
                       what="a build after the broker dropped every connection")
        assert shown["status"] == "ACTIVE", (shown, d.logs())
        fourth_host = shown["OS-EXT-SRV-ATTR:host"]

        # Nothing else is held anywhere.
        used = {name: u for name, u in d.usages().items() if u}
        expected: dict[str, dict[str, int]] = {"steady-a": dict(FLAVOR), "steady-b": dict(FLAVOR)}
        for host in (third_host, fourth_host):
            expected[host] = {rc: n + expected.get(host, {}).get(rc, 0) for rc, n in FLAVOR.items()}
        assert used == expected, used
    finally:
        cell1_engine.dispose()
        cell2_engine.dispose()
