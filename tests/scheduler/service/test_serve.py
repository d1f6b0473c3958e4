"""What ``billeting scheduler serve`` builds in each worker: the service on
an in-process or HTTP Placement, and its group lock on a shared SQLite file."""
from __future__ import annotations

from billeting.apidb import migrate as api_migrate
from billeting.placement.store import migrate as placement_migrate
from billeting.common.db.engine import make_engine
from billeting.placement.store.sync import sync_standard_names
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler.serve import build_service, load_app
from billeting.scheduler.service import groups
from billeting.scheduler.service.config import ServiceConfig
from tests.conftest import PlacementClient as WsgiClient
from tests.scheduler.service.conftest import Fleet, simple_request


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
