"""An anti-affinity group on a fleet of two cells: members spread over both
cells (a move stays in its cell, so a group packed into one cell could not
move), and a move the cell restriction defeats says so."""
from __future__ import annotations
from tests.support.wait import wait_for



def _setup(plane_factory):
    p = plane_factory(cells=("cell1", "cell2"), computes=0)
    # Every cell1 host registers before any cell2 host: Placement lists them in that order.
    for cell, names in (("cell1", ("a1", "a2", "a3")), ("cell2", ("b1", "b2", "b3"))):
        for name in names:
            p.d.compute(name, cell=cell)
    p.flavor()
    r = p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "apart", "policy": "anti-affinity"}})
    assert r.status_code == 200, r.text
    return p, r.json["server_group"]["id"]


def _server(p, uuid: str) -> dict:
    return p.call("GET", f"/v2.1/servers/{uuid}").json["server"]


def _settled(p, uuid: str, status: str) -> dict:
    return wait_for(lambda: (s := _server(p, uuid))["status"] == status and s["OS-EXT-STS:task_state"] is None
                    and s, what=f"{uuid} {status}")


def _cell_of(host: str) -> str:
    return "cell1" if host.startswith("a") else "cell2"


def test_anti_affinity_members_use_both_cells_and_can_move(plane_factory):
    p, group = _setup(plane_factory)
    members = []
    for i in range(2):
        members.append(p.boot(name=f"m{i}", hints={"group": group}))
        _settled(p, members[-1], "ACTIVE")
    hosts = [_server(p, u)["OS-EXT-SRV-ATTR:host"] for u in members]
    assert sorted(_cell_of(h) for h in hosts) == ["cell1", "cell2"], hosts

    # No destination asked for: a free host of the member's own cell takes it.
    r = p.call("POST", f"/v2.1/servers/{members[0]}/action", {"migrate": None})
    assert r.status_code == 202, r.text
    moved = _settled(p, members[0], "VERIFY_RESIZE")["OS-EXT-SRV-ATTR:host"]
    assert _cell_of(moved) == _cell_of(hosts[0]) and moved not in hosts
    assert p.call("POST", f"/v2.1/servers/{members[0]}/action", {"confirmResize": None}).status_code == 204
    _settled(p, members[0], "ACTIVE")


def test_more_members_than_one_cell_has_hosts_and_a_full_cell_explained(plane_factory):
    p, group = _setup(plane_factory)
    members = []
    for i in range(6):  # every host of the fleet, three per cell
        members.append(p.boot(name=f"m{i}", hints={"group": group}))
        _settled(p, members[-1], "ACTIVE")
    hosts = {_server(p, u)["OS-EXT-SRV-ATTR:host"] for u in members}
    assert hosts == {"a1", "a2", "a3", "b1", "b2", "b3"}

    # Every host runs a member: the other cell is ruled out by the cell, not by a "destination".
    r = p.call("POST", f"/v2.1/servers/{members[0]}/action", {"migrate": None})
    assert r.status_code == 400, r.text
    message = r.json["badRequest"]["message"]
    own = _cell_of(_server(p, members[0])["OS-EXT-SRV-ATTR:host"])
    assert "requested destination" not in message, message
    assert f"3 were in another cell than {own}, the only cell the request allows" in message, message
    assert f"A move stays in the server's cell ({own})" in message, message
    assert "2 were removed by server group anti-affinity" in message, message


def _cells_of_plane(p) -> dict[str, str]:
    """host → cell, as the plane wires them (host1, host3 in cell1; host2, host4 in cell2)."""
    return {f"host{i}": ("cell1" if i % 2 else "cell2") for i in range(1, 5)}


def test_one_request_of_members_spreads_and_refusals_name_each_exclusion(plane_factory):
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
    cell = _cells_of_plane(p)
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
