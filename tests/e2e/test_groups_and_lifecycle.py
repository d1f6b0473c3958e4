"""Server groups across cells and the lifecycle actions, distributed: every
service its own process on PostgreSQL and RabbitMQ (see ``deploy.py``).

* A 10-member anti-affinity group on 2 cells x 5 computes puts one member
  on every host, so both cells hold members. A member moved with no
  destination asked goes to the one free host of its cell; a member of the
  other cell, which has no free host, is refused with an explanation that
  says the move stays in its cell, not that hosts "were not the requested
  destination".
* stop/start, lock, rebuild, shelve (offloaded: Placement holds nothing),
  unshelve (scheduled again: Placement holds the new host) and delete, each
  checked through Placement's API.
"""
from __future__ import annotations

import os

import pytest

from tests.e2e.deploy import Deployment
from tests.e2e.test_distributed import allocations, create_flavor, provider_names, server

pytestmark = pytest.mark.slow

CELLS = {"cell1": tuple(f"c1-host{i}" for i in range(1, 6)), "cell2": tuple(f"c2-host{i}" for i in range(1, 6))}
SMALL = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


@pytest.fixture(autouse=True)
def patient_start(monkeypatch):
    """A dozen interpreters starting at once on a small, busy machine take
    longer than the one-minute waits of ``deploy``: wait up to four."""
    if float(os.environ.get("BILLETING_E2E_STARTUP_TIMEOUT", "60")) < 240:
        monkeypatch.setenv("BILLETING_E2E_STARTUP_TIMEOUT", "240")


def _deploy(deployment_factory, cells: dict[str, tuple[str, ...]]) -> Deployment:
    d = deployment_factory(cells)
    d.register()
    d.start_placement()
    for cell in d.cells:
        d.start_conductor(cell)
    for cell in d.cells:  # (started together: ten interpreters starting one by one take minutes)
        for host in cell.hosts:
            d.start_compute(cell, host, build_time=0.05, failure_rate=0.0, wait=False)
    for cell in d.cells:
        for host in cell.hosts:
            d.procs[f"compute-{host}"].wait_for_line(f"compute {host} serving")
    d.start_control_plane(schedulers=1, super_conductors=1)
    create_flavor(d)
    return d


def _settled(d: Deployment, uuid: str, status: str, timeout: float = 60.0) -> dict:
    return d.wait(lambda: (s := server(d, uuid))["status"] == status and s["OS-EXT-STS:task_state"] is None and s,
                  timeout=timeout, what=f"{uuid} {status}")


def _act(d: Deployment, uuid: str, body: dict) -> tuple[int, dict]:
    status, answer, _ = d.api("POST", f"/v2.1/servers/{uuid}/action", body)
    return status, answer


def _cell_of(host: str) -> str:
    return next(name for name, hosts in CELLS.items() if host in hosts)


def test_an_anti_affinity_group_spreads_over_both_cells_and_its_members_move(deployment_factory):
    d = _deploy(deployment_factory, CELLS)
    status, body, _ = d.api("POST", "/v2.1/os-server-groups",
                            {"server_group": {"name": "spread", "policy": "anti-affinity"}})
    assert status == 200, body
    group = body["server_group"]["id"]
    status, body, _ = d.api("POST", "/v2.1/servers", {
        "server": {"name": "member", "flavorRef": "1", "imageRef": "cirros", "networks": "none",
                   "min_count": 10, "max_count": 10}, "os:scheduler_hints": {"group": group}})
    assert status == 202, body
    status, listed, _ = d.api("GET", "/v2.1/servers?name=member")
    uuids = [s["id"] for s in listed["servers"]]
    assert len(uuids) == 10
    hosts = {u: _settled(d, u, "ACTIVE")["OS-EXT-SRV-ATTR:host"] for u in uuids}
    assert sorted(hosts.values()) == sorted(h for hs in CELLS.values() for h in hs), hosts  # one per host
    assert {_cell_of(h) for h in hosts.values()} == {"cell1", "cell2"}

    # Free one host of cell1: its members may move there, cell2's have nowhere to go in their cell.
    freed = next(u for u, h in hosts.items() if _cell_of(h) == "cell1")
    status, _, _ = d.api("DELETE", f"/v2.1/servers/{freed}")
    assert status == 204
    d.wait(lambda: allocations(d, freed) == {}, timeout=30, what="the deleted member's allocation freed")
    mover = next(u for u, h in hosts.items() if _cell_of(h) == "cell1" and u != freed)
    status, answer = _act(d, mover, {"migrate": None})
    assert status == 202, answer
    moved = _settled(d, mover, "VERIFY_RESIZE")
    assert moved["OS-EXT-SRV-ATTR:host"] == hosts[freed]
    assert _act(d, mover, {"confirmResize": None})[0] == 204

    stuck = next(u for u, h in hosts.items() if _cell_of(h) == "cell2")
    status, answer = _act(d, stuck, {"migrate": None})
    assert status == 400, answer
    message = answer["badRequest"]["message"]
    assert "No valid host" in message and "requested destination" not in message, message
    assert "cell2" in message and "another cell" in message, message


def test_lifecycle_actions_keep_placement_exact(deployment_factory):
    d = _deploy(deployment_factory, {"cell1": ("l1-host1",), "cell2": ("l2-host1",)})
    names = provider_names(d)
    status, body, _ = d.api("POST", "/v2.1/servers", {"server": {"name": "life", "flavorRef": "1",
                                                                 "imageRef": "cirros", "networks": "none"}})
    assert status == 202, body
    uuid = body["server"]["id"]
    host = _settled(d, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]

    def held() -> dict[str, dict]:
        return {names.get(rp, rp): res for rp, res in allocations(d, uuid).items()}

    assert held() == {host: SMALL}
    assert _act(d, uuid, {"os-stop": None})[0] == 202
    assert _settled(d, uuid, "SHUTOFF")["OS-EXT-SRV-ATTR:host"] == host and held() == {host: SMALL}
    assert _act(d, uuid, {"os-start": None})[0] == 202
    _settled(d, uuid, "ACTIVE")

    assert _act(d, uuid, {"lock": None})[0] == 202
    assert server(d, uuid)["locked"] is True
    assert _act(d, uuid, {"unlock": None})[0] == 202

    status, answer = _act(d, uuid, {"rebuild": {"imageRef": "cirros", "name": "life-rebuilt"}})
    assert status == 202 and answer["server"]["id"] == uuid, answer
    assert _settled(d, uuid, "ACTIVE")["name"] == "life-rebuilt" and held() == {host: SMALL}

    assert _act(d, uuid, {"shelve": None})[0] == 202
    offloaded = _settled(d, uuid, "SHELVED_OFFLOADED")
    assert offloaded["OS-EXT-SRV-ATTR:host"] is None and held() == {}
    status, answer = _act(d, uuid, {"unshelve": None})
    assert status == 202, answer
    again = _settled(d, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
    assert held() == {again: SMALL}

    status, listed, _ = d.api("GET", f"/v2.1/servers/{uuid}/os-instance-actions")
    assert {"create", "stop", "start", "lock", "unlock", "rebuild", "shelve", "unshelve"} <= {
        a["action"] for a in listed["instanceActions"]}, listed
    assert d.api("DELETE", f"/v2.1/servers/{uuid}")[0] == 204
    d.wait(lambda: allocations(d, uuid) == {}, timeout=30, what="the delete to free the allocation")
    d.wait(lambda: all(not used for used in d.usages().values()), timeout=30, what="every provider empty")
