"""What ``billeting scheduler serve`` builds in each worker: the service on
an in-process or HTTP Placement, its group lock on a shared SQLite file,
and its host records of the cells, read again as soon as a cell is back."""
from __future__ import annotations

from billeting.apidb import cell_mappings
from billeting.apidb import migrate as api_migrate
from billeting.cells.wiring import open_cell_database
from billeting.placement.store import migrate as placement_migrate
from billeting.common.db.engine import make_engine
from billeting.placement.store.sync import sync_standard_names
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler.serve import build_service, load_app
from billeting.scheduler.service import groups
from billeting.scheduler.service.config import ServiceConfig
from tests.conftest import PlacementClient as WsgiClient
from tests.scheduler.service.conftest import Fleet, simple_request
from tests.support.wait import wait_for


def test_one_sqlite_file_for_placement_and_the_api_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'all.sqlite'}"
    engine = make_engine(url)
    placement_migrate.upgrade(engine)
    sync_standard_names(engine)
    api_migrate.upgrade(engine)
    engine.dispose()
    service = build_service(ServiceConfig(db=url, placement_db=url))
    assert isinstance(service.client, InProcessPlacementClient) and service.group_lock.in_process
    Fleet(service.client).add("h1")
    Fleet(service.client).add("h2")
    api = WsgiClient(load_app(ServiceConfig(db=url, placement_db=url)))
    group = api.post("/server_groups", json={"name": "g", "policy": "anti-affinity"}).json
    hosts = {api.post("/selections", json=simple_request(server_group=group["uuid"])).json["selections"][0][0][
        "nodename"] for _ in range(2)}
    assert hosts == {"h1", "h2"} and len(groups.get(service, group["uuid"]).members) == 2


def test_an_http_placement_by_default(apidb_url):
    service = build_service(ServiceConfig(db=apidb_url, placement_url="http://127.0.0.1:9"))
    assert service.client.transport.base_url == "http://127.0.0.1:9" and not service.group_lock.in_process
    assert service.client.auth.headers() == {"X-Auth-Token": "admin"}


def test_a_cell_back_has_the_service_read_its_host_records_again_at_once(tmp_path):
    """The standalone scheduler's catalog is refreshed when the health guard
    sees a cell answer again, not at its next periodic refresh."""
    url = f"sqlite:///{tmp_path / 'all.sqlite'}"
    engine = make_engine(url)
    placement_migrate.upgrade(engine)
    sync_standard_names(engine)
    api_migrate.upgrade(engine)
    cell_url = f"sqlite:///{tmp_path / 'cell1.sqlite'}"
    open_cell_database(cell_url, upgrade=True).dispose()
    cell_mappings.ensure_cell(engine, name="cell1", database_connection=cell_url, transport_url="memory:///cell1-serve")
    engine.dispose()
    service = build_service(ServiceConfig(db=url, placement_db=url))
    catalog = service.catalog
    read = catalog.reports
    reads = []
    catalog.reports = lambda: (reads.append(1), read())[1]
    catalog.refresh_s = 3600.0  # no periodic refresh during the test
    catalog.size()
    assert len(reads) == 1
    health = read.cells.health
    health.mark_down("cell1", "refused")
    catalog.size()
    assert len(reads) == 1  # (going down alone does not refresh)
    health.mark_up("cell1")
    wait_for(lambda: (catalog.size(), len(reads) == 2)[1], timeout=5, what="the catalog read again")
    service.close()
