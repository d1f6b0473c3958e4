"""A server group over two cells, in one process (the distributed version is
tests/e2e/test_groups_and_lifecycle.py): anti-affinity members spread over
both cells' hosts, and a member's move with no destination asked stays in
its cell, with an explanation that says so."""
from __future__ import annotations

from tests.controlplane.conftest import wait_for


def _cells_of(p) -> dict[str, str]:
    """host → cell, as the plane wires them (host1, host3 in cell1; host2, host4 in cell2)."""
    return {f"host{i}": ("cell1" if i % 2 else "cell2") for i in range(1, 5)}


def test_anti_affinity_members_spread_over_both_cells_and_move_within_theirs(plane_factory):
    p = plane_factory(cells=("cell1", "cell2"), computes=4)
    p.flavor()
    r = p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "g", "policy": "anti-affinity"}})
    assert r.status_code == 200, r.text
    group = r.json["server_group"]["id"]
    r = p.call("POST", "/v2.1/servers", {"server": {"name": "m", "flavorRef": "1", "imageRef": "cirros",
                                                    "networks": "none", "min_count": 4, "max_count": 4},
                                         "os:scheduler_hints": {"group": group}})
    assert r.status_code == 202, r.text
    uuids = [s["id"] for s in p.call("GET", "/v2.1/servers?name=m").json["servers"]]
    wait_for(lambda: all(p.status(u) == "ACTIVE" for u in uuids), what="the members ACTIVE")
    hosts = {u: p.call("GET", f"/v2.1/servers/{u}").json["server"]["OS-EXT-SRV-ATTR:host"] for u in uuids}
    cell = _cells_of(p)
    assert sorted(hosts.values()) == ["host1", "host2", "host3", "host4"], hosts
    assert {cell[h] for h in hosts.values()} == {"cell1", "cell2"}

    freed = next(u for u, h in hosts.items() if cell[h] == "cell1")
    assert p.call("DELETE", f"/v2.1/servers/{freed}").status_code == 204
    wait_for(lambda: p.d.placement.get_allocations(freed).as_resources() == {}, what="the member's claim freed")
    mover = next(u for u, h in hosts.items() if cell[h] == "cell1" and u != freed)
    r = p.call("POST", f"/v2.1/servers/{mover}/action", {"migrate": None})
    assert r.status_code == 202, r.text
    wait_for(lambda: p.status(mover) == "VERIFY_RESIZE", what="the member moved")
    assert p.call("GET", f"/v2.1/servers/{mover}").json["server"]["OS-EXT-SRV-ATTR:host"] == hosts[freed]

    stuck = next(u for u, h in hosts.items() if cell[h] == "cell2")
    r = p.call("POST", f"/v2.1/servers/{stuck}/action", {"migrate": None})
    assert r.status_code == 400, r.text
    message = r.json["badRequest"]["message"]
    assert "requested destination" not in message and message.count("No valid host was found") == 1, message
    assert "another cell than cell2" in message and "stays in the server's cell (cell2)" in message, message
    assert "removed by server group anti-affinity" in message, message
    assert f"The host excluded is the server's own, {hosts[stuck]}" in message, message
