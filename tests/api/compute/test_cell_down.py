"""A cell whose database the API level cannot reach, in one process: the
compute API lists and shows what the API database knows (2.69), refuses
actions with a 503, lists the cell's services as UNKNOWN; the scheduler
keeps its hosts out; a hand-off the cell refuses goes to another cell (or
ERROR, claim released); and everything is back once the cell answers.

The cell is made unreachable by giving the API level's catalog an engine
on a port nobody listens on in place of the cell's: the cell's own
services (computes, conductor) keep theirs, as in a network split."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from billeting.apidb import build_requests, instance_mappings
from billeting.apidb.cell_directory import CellCatalog
from billeting.cells.health import HealthSettings
from billeting.cells.health_metrics import CELLS_SKIPPED
from billeting.conductor.move_protocols import CellHandle
from tests.cells.silent_server import SilentServer
from tests.support.wait import wait_for
from tests.support.ports import free_port

V69 = {"OpenStack-API-Version": "compute 2.69"}
V68 = {"OpenStack-API-Version": "compute 2.68"}


def unreachable_engine():
    return create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/gone?connect_timeout=2")


def cut(catalog: CellCatalog, cell: str, engine=None):
    """Point ``catalog``'s ``cell`` at a database that refuses (or at
    ``engine``); returns the undo."""
    real = catalog._handles[cell]
    catalog._handles[cell] = CellHandle(cell, engine if engine is not None else unreachable_engine(), real.bus)

    def restore() -> None:
        catalog._handles[cell].engine.dispose()
        catalog._handles[cell] = real
    return restore


@pytest.fixture
def two_cells(plane_factory):
    p = plane_factory(cells=("cell1", "cell2"), computes=2)   # host1 in cell1, host2 in cell2
    p.cells.health.settings = HealthSettings(timeout_s=1.0, skip_s=0.2)
    p.flavor()
    return p


def boot_on(p, host: str, name: str) -> str:
    uuid = p.boot(name=name, availability_zone=f"nova:{host}")
    wait_for(lambda: p.status(uuid) == "ACTIVE", what=f"{name} ACTIVE")
    return uuid


def listed(p, path: str, headers) -> dict[str, dict]:
    r = p.call("GET", path, headers=headers)
    assert r.status_code == 200, r.text
    return {s["id"]: s for s in r.json["servers"]}


def test_the_api_answers_for_a_cell_that_is_down(two_cells):
    p = two_cells
    one, two = boot_on(p, "host1", "one"), boot_on(p, "host2", "two")
    service_ids = {(s["host"], s["binary"]): s["id"] for s in p.call("GET", "/v2.1/os-services",
                                                                     headers=V69).json["services"]}
    restore = cut(p.cells, "cell2")
    try:
        detail = listed(p, "/v2.1/servers/detail", V69)
        assert set(detail) == {one, two}
        assert detail[one]["status"] == "ACTIVE" and detail[one]["name"] == "one"
        down = detail[two]
        assert down["status"] == "UNKNOWN" and down["tenant_id"] == "admin" and down["created"]
        assert down["flavor"]["original_name"] == "small" and down["image"]["id"] == "cirros"
        assert down["links"][0]["href"].endswith(f"/v2.1/servers/{two}")
        assert "name" not in down and "OS-EXT-SRV-ATTR:host" not in down
        index = listed(p, "/v2.1/servers", V69)
        assert index[two]["status"] == "UNKNOWN" and index[one]["name"] == "one"
        # Before 2.69 the down cell's servers are left out; the others are listed.
        assert set(listed(p, "/v2.1/servers/detail", V68)) == {one}
        assert set(listed(p, "/v2.1/servers", V68)) == {one}
        # A filter only the cell could answer leaves them out too.
        assert set(listed(p, "/v2.1/servers/detail?name=o", V69)) == {one}
        # Paging goes through them (they come last).
        r = p.call("GET", "/v2.1/servers/detail?limit=1", headers=V69)
        assert [s["id"] for s in r.json["servers"]] == [one], r.text
        r = p.call("GET", f"/v2.1/servers/detail?limit=1&marker={one}", headers=V69)
        assert [s["id"] for s in r.json["servers"]] == [two], r.text

        r = p.call("GET", f"/v2.1/servers/{two}", headers=V69)
        assert r.status_code == 200, r.text
        assert r.json["server"]["status"] == "UNKNOWN" and r.json["server"]["user_id"] == "admin"
        r = p.call("GET", f"/v2.1/servers/{two}", headers=V68)
        assert r.status_code == 503 and "cell2" in r.json["serviceUnavailable"]["message"], r.text
        assert p.call("GET", f"/v2.1/servers/{one}", headers=V69).json["server"]["status"] == "ACTIVE"

        r = p.call("GET", "/v2.1/os-services", headers=V69)
        assert r.status_code == 200, r.text
        by_host = {(s["host"], s["binary"]): s for s in r.json["services"]}
        assert by_host[("host2", "nova-compute")]["status"] == "UNKNOWN"
        assert by_host[("host1", "nova-compute")]["status"] == "enabled"
        r = p.call("GET", "/v2.1/os-services", headers=V68)
        assert "host2" not in {s["host"] for s in r.json["services"]}

        for method, path, body in (("POST", f"/v2.1/servers/{two}/action", {"confirmResize": None}),
                                   ("POST", f"/v2.1/servers/{two}/action", {"migrate": None}),
                                   ("DELETE", f"/v2.1/servers/{two}", None)):
            r = p.call(method, path, body, headers=V69)
            assert r.status_code == 503, (method, path, r.text)
            assert "cell (cell2) is unavailable" in r.json["serviceUnavailable"]["message"], r.text
        assert p.call("GET", "/v2.1/os-hypervisors", headers=V69).status_code == 200

        # Changing a service that may be in the down cell: 503 (not 404: nobody can tell it is not there).
        host2 = service_ids[("host2", "nova-compute")]
        for method, path, body, headers in (
                ("PUT", f"/v2.1/os-services/{host2}", {"status": "disabled"}, V69),
                ("DELETE", f"/v2.1/os-services/{host2}", None, V69),
                ("PUT", "/v2.1/os-services/disable", {"host": "host2", "binary": "nova-compute"}, V68 | {
                    "OpenStack-API-Version": "compute 2.52"}),
                ("DELETE", "/v2.1/os-services/1", None, {"OpenStack-API-Version": "compute 2.52"})):
            r = p.call(method, path, body, headers=headers)
            assert r.status_code == 503, (method, path, r.text)
            assert "cell2" in r.json["serviceUnavailable"]["message"], r.text
        # the healthy cell's services still change
        r = p.call("PUT", f"/v2.1/os-services/{service_ids[('host1', 'nova-compute')]}", {"status": "enabled"},
                   headers=V69)
        assert r.status_code == 200 and r.json["service"]["status"] == "enabled", r.text
    finally:
        restore()
    # Back without restarting anything (once the skip window has passed).
    wait_for(lambda: p.status(two) == "ACTIVE", timeout=10, what="the cell's server shown again")
    assert p.call("DELETE", f"/v2.1/servers/{two}").status_code == 204
    wait_for(lambda: not p.d.placement.get_allocations(two).allocations, what="its allocation freed")


def test_a_cell_database_that_hangs_is_waited_on_once_then_skipped(two_cells):
    """A server that accepts connections and never answers: the first
    listing waits for the read deadline, the next ones skip the cell."""
    p = two_cells
    one, two = boot_on(p, "host1", "one"), boot_on(p, "host2", "two")
    p.cells.health.settings = HealthSettings(timeout_s=0.5, skip_s=60.0)
    silent = SilentServer()
    restore = cut(p.cells, "cell2", create_engine(
        f"postgresql+psycopg://nobody@127.0.0.1:{silent.port}/hangs?connect_timeout=30"))
    try:
        first = listed(p, "/v2.1/servers/detail", V69)
        assert first[one]["status"] == "ACTIVE" and first[two]["status"] == "UNKNOWN"
        opened = len(silent.accepted)
        for _ in range(5):
            again = listed(p, "/v2.1/servers/detail", V69)
            assert again[two]["status"] == "UNKNOWN"
            assert p.call("GET", f"/v2.1/servers/{two}", headers=V69).json["server"]["status"] == "UNKNOWN"
        assert len(silent.accepted) == opened, "the hanging cell was tried again within its skip window"
    finally:
        silent.close()
        restore()


def test_the_scheduler_leaves_a_down_cells_hosts_out_and_counts_it(two_cells):
    p = two_cells
    boot_on(p, "host2", "seen")  # (its host records were read once)
    before = CELLS_SKIPPED.labels("cell2")._value.get()
    restore = cut(p.cells, "cell2")
    try:
        made = [p.boot(name=f"new-{i}") for i in range(4)]
        for uuid in made:
            wait_for(lambda uuid=uuid: p.status(uuid) == "ACTIVE", what="built in the cell that answers")
            assert instance_mappings.get(p.api_engine, uuid).cell == "cell1"
        assert CELLS_SKIPPED.labels("cell2")._value.get() > before
    finally:
        restore()


def test_a_hand_off_the_cell_refuses_goes_to_another_cell_or_to_error(two_cells, caplog):
    p = two_cells
    host2 = p.d.placement.list_providers(name="host2")[0].uuid
    # The scheduler still reads cell2 fine; only the super conductor cannot reach it.
    conductor = p.plane.conductor
    seen = CellCatalog(p.api_engine, p.cells.cells(), p.cells.cell0)
    seen.health.settings = HealthSettings(timeout_s=1.0, skip_s=0.2)
    conductor.cells = seen
    cut(seen, "cell2")
    made = [p.boot(name=f"vm-{i}") for i in range(4)]
    for uuid in made:
        wait_for(lambda uuid=uuid: p.status(uuid) == "ACTIVE", what="built in cell1")
        assert instance_mappings.get(p.api_engine, uuid).cell == "cell1"
        assert host2 not in p.d.placement.get_allocations(uuid).allocations
    # (the scheduler spreads: some of them were first given host2)
    assert "scheduled again without that cell" in caplog.text
    # Asked for a host of that cell: nowhere else to go, ERROR with the reason; no claim kept.
    forced = p.boot(name="forced", availability_zone="nova:host2")
    wait_for(lambda: p.status(forced) == "ERROR", what="ERROR")
    server = p.call("GET", f"/v2.1/servers/{forced}").json["server"]
    assert "cell2" in server["fault"]["message"], server["fault"]
    assert not p.d.placement.get_allocations(forced).allocations
    assert p.d.placement.provider_usages(host2) == {} or not any(p.d.placement.provider_usages(host2).values())


def test_deleting_a_server_still_waiting_for_its_hand_off_frees_its_claim(two_cells):
    """A super conductor that failed or died after the scheduler claimed
    leaves the build request; its DELETE gives the claim back."""
    p = two_cells
    conductor = p.plane.conductor
    conductor.schedule_and_build = lambda plan, resumed=False: conductor.scheduler.select(
        conductor._request(plan, plan.instance_uuids), 0)   # claims, then "dies"
    uuid = p.boot(name="stuck")
    wait_for(lambda: p.d.placement.get_allocations(uuid).allocations, what="the claim")
    del conductor.schedule_and_build
    assert build_requests.get(p.api_engine, uuid) is not None
    assert p.status(uuid) == "BUILD"
    assert p.call("DELETE", f"/v2.1/servers/{uuid}").status_code == 204
    assert not p.d.placement.get_allocations(uuid).allocations


def test_a_process_started_while_a_cell_is_down_serves_the_others(api_engine, deployment):
    """``CellCatalog.open`` with one cell's database refusing: no error; that
    cell is marked down and read again once its skip window has passed."""
    from billeting.apidb import cell_mappings

    wiring = deployment.cell("cell1")
    cell_mappings.ensure_cell(api_engine, name="cell1", database_connection=str(wiring.cell.database_url),
                              transport_url="memory:///cell1-open")
    cell_mappings.ensure_cell(api_engine, name="cell9", transport_url="memory:///cell9-open",
                              database_connection=f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/gone")
    catalog = CellCatalog.open(api_engine)
    try:
        assert catalog.health.is_down("cell9") and not catalog.health.is_down("cell1")
        assert set(catalog.cells()) == {"cell1", "cell9"}
        assert "connect_timeout=3" in catalog.engine_of("cell9").url.render_as_string()
    finally:
        catalog.close()


def test_a_build_forced_onto_a_host_of_a_cell_just_back_is_placed_at_once(two_cells):
    """While cell2 is down the scheduler's records show its hosts down; when
    it answers again they are read again at once (the health guard's
    on_change), not at the scheduler's next periodic refresh."""
    p = two_cells
    catalog = p.plane.scheduler.catalog
    boot_on(p, "host2", "before")
    restore = cut(p.cells, "cell2")
    try:
        catalog.invalidate()
        catalog.size()  # read while cell2 is down: host2 shown down
        assert p.call("GET", "/v2.1/servers/detail", headers=V69).status_code == 200
    finally:
        restore()
    catalog.refresh_s = 3600.0  # no periodic refresh during the rest of the test
    # the cell answers again (probed by a read once its skip window has passed)
    wait_for(lambda: p.call("GET", "/v2.1/os-services", headers=V68).json["services"] and
             "cell2" not in p.cells.health.down_cells(), timeout=10, what="cell2 back")
    after = p.boot(name="after", availability_zone="nova:host2")
    wait_for(lambda: p.status(after) in ("ACTIVE", "ERROR"), what="the forced build done")
    assert p.status(after) == "ACTIVE"


def test_a_service_change_whose_cell_stops_answering_after_the_service_was_found_is_a_503(two_cells, monkeypatch):
    """``PUT``/``DELETE /os-services/{id}`` read the cell again after finding
    the service (its servers, its moves, its nodes) and then write it: a cell
    gone meanwhile answers 503 like the other actions, and nothing of the
    service is removed."""
    from billeting.api.compute import services

    p = two_cells
    ids = {s["host"]: s["id"] for s in p.call("GET", "/v2.1/os-services", headers=V69).json["services"]
           if s["binary"] == "nova-compute"}
    found_then_cut = services._all_services
    cuts = []

    def all_services(deps, down=None):
        found = found_then_cut(deps, down)
        cuts.append(cut(p.cells, "cell2"))
        return found
    monkeypatch.setattr(services, "_all_services", all_services)
    for method, body in (("DELETE", None), ("PUT", {"status": "disabled"})):
        r = p.call(method, f"/v2.1/os-services/{ids['host2']}", body, headers=V69)
        assert r.status_code == 503, (method, r.text)
        assert "cell2" in r.json["serviceUnavailable"]["message"], r.text
        cuts.pop()()
        wait_for(lambda: found_then_cut(p.plane.deps) and "cell2" not in p.cells.health.down_cells(),
                 timeout=10, what="cell2 back")
    monkeypatch.undo()
    listed_services = {s["host"]: s for s in p.call("GET", "/v2.1/os-services", headers=V69).json["services"]
                       if s["binary"] == "nova-compute"}
    assert listed_services["host2"]["status"] == "enabled"
    assert p.call("DELETE", f"/v2.1/os-services/{ids['host2']}", headers=V69).status_code == 204
