"""Fixtures for the scheduler service: an API database of its own (never
the shared Placement test database, whose schema test compares tables),
the in-process Placement client, a small fleet, and the HTTP API."""
from __future__ import annotations

import uuid as uuidlib

import pytest
from sqlalchemy import delete

from billeting.apidb import migrate as api_migrate
from billeting.apidb import tables as api_tables
from billeting.common.db.engine import make_engine
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.placement_client.model import Inventory
from billeting.scheduler.service.runtime import SchedulerService
from billeting.scheduler.settings import SchedulerSettings
from tests.conftest import _create_database


@pytest.fixture(scope="session")
def apidb_url(tmp_path_factory):
    db = _create_database(tmp_path_factory)
    yield db.url
    db.drop()


@pytest.fixture(scope="session")
def apidb_engine(apidb_url):
    eng = make_engine(apidb_url)
    api_migrate.upgrade(eng)
    yield eng
    eng.dispose()


def wipe_apidb(engine) -> None:
    with engine.begin() as conn:
        for table in api_tables.USER_DATA_TABLES:
            conn.execute(delete(table))


@pytest.fixture
def apidb(apidb_engine):
    yield apidb_engine
    wipe_apidb(apidb_engine)


@pytest.fixture
def placement(engine, settings):
    client = InProcessPlacementClient(engine, settings)
    yield client
    client.close()


@pytest.fixture
def service(placement, apidb):
    svc = SchedulerService(placement, apidb, SchedulerSettings(catalog_refresh_s=0.0))
    yield svc


class Fleet:
    """Hosts made in Placement: name -> provider uuid."""

    def __init__(self, client) -> None:
        self.client = client
        self.uuids: dict[str, str] = {}

    def add(self, name: str, *, vcpu: int = 8, memory_mb: int = 16384, disk_gb: int = 100) -> str:
        uuid = str(uuidlib.uuid4())
        rp = self.client.create_provider(name, uuid=uuid)
        self.client.put_inventories(uuid, rp.generation, {
            "VCPU": Inventory(total=vcpu), "MEMORY_MB": Inventory(total=memory_mb),
            "DISK_GB": Inventory(total=disk_gb)})
        self.uuids[name] = uuid
        return uuid

    def aggregates(self, name: str) -> set[str]:
        return set(self.client.get_aggregates(self.uuids[name]).aggregates)

    def join(self, name: str, aggregate: str) -> None:
        """Put the host in ``aggregate`` in Placement (as anyone but the scheduler would)."""
        current = self.client.get_aggregates(self.uuids[name])
        assert self.client.put_aggregates(self.uuids[name], [*current.aggregates, aggregate],
                                          current.resource_provider_generation).ok


@pytest.fixture
def fleet(placement) -> Fleet:
    return Fleet(placement)


@pytest.fixture
def api(service):
    """The scheduler API in-process, called as an admin (noauth2)."""
    from billeting.scheduler.api.app import make_app
    from tests.conftest import PlacementClient as WsgiClient

    return WsgiClient(make_app(service))


@pytest.fixture
def api_as(service):
    from billeting.scheduler.api.app import make_app
    from tests.conftest import PlacementClient as WsgiClient

    app = make_app(service)

    def build(token):
        return WsgiClient(app, token=token)

    return build


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def simple_request(*instances: str, vcpu: int = 1, memory_mb: int = 512, **extra) -> dict:
    return {"instance_uuids": list(instances) or [new_uuid()], "project_id": "p1", "user_id": "u1",
            "groups": [{"resources": {"VCPU": vcpu, "MEMORY_MB": memory_mb}}], **extra}
