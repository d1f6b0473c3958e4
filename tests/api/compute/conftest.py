"""The control plane in one process: an API database on the run's backend,
cells from ``tests/cells`` (fake computes, cell conductors, memory buses),
the real ``ControlPlane`` (scheduler, super conductor) and the compute API
through Falcon's test client."""
from __future__ import annotations

import falcon.testing
import orjson
import pytest
from sqlalchemy import delete

from billeting.api.compute.plane import ControlPlane
from billeting.apidb import cell_mappings, images
from billeting.apidb import migrate as api_migrate
from billeting.apidb import tables as at
from billeting.apidb.cell_directory import CellCatalog
from billeting.conductor.move_protocols import CellHandle
from billeting.common.db.engine import make_engine
from tests.cells.conftest import (  # noqa: F401 - the cell fixtures, reused
    Deployment,
    cell_database_factory,
    deployment,
    placement,
)
from tests.conftest import _create_database

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.90"}


@pytest.fixture(scope="session")
def api_db_url(tmp_path_factory):
    db = _create_database(tmp_path_factory)
    engine = make_engine(db.url)
    api_migrate.upgrade(engine)
    engine.dispose()
    yield db.url
    db.drop()


@pytest.fixture
def api_engine(api_db_url):
    engine = make_engine(api_db_url)
    yield engine
    with engine.begin() as conn:
        for table in at.USER_DATA_TABLES:
            conn.execute(delete(table))
    engine.dispose()


class Plane:
    def __init__(self, deployment: Deployment, api_engine, *, cells=("cell1",), computes=2,  # noqa: F811 - the fixture imported above
                 build_attempts: int = 3, scheduler_settings=None, policy_file: str | None = None) -> None:
        self.d = deployment
        for name in ("cell0", *cells):
            wiring = deployment.cell(name)
            cell_mappings.ensure_cell(api_engine, name=name, database_connection=str(wiring.cell.database_url),
                                      transport_url=wiring.cell.transport_url)
        for i in range(computes):
            deployment.compute(f"host{i + 1}", cell=cells[i % len(cells)])
        for name in cells:
            deployment.conductor(name)
        handles = {n: CellHandle(n, deployment.cells[n].engine, deployment.cells[n].bus) for n in cells}
        self.cells = CellCatalog(api_engine, handles, deployment.cells["cell0"].engine)
        self.plane = ControlPlane(api_engine=api_engine, cells=self.cells, placement=deployment.placement,
                                  build_attempts=build_attempts, catalog_refresh_s=0.0,
                                  scheduler_settings=scheduler_settings, policy_file=policy_file)
        images.put(api_engine, "cirros", name="cirros")
        self.api_engine = api_engine
        self.client = falcon.testing.TestClient(self.plane.app())

    def call(self, method: str, path: str, body=None, headers=None, raw: bytes | None = None):
        hdrs = dict(ADMIN)
        hdrs.update(headers or {})
        if body is not None or raw is not None:
            hdrs["Content-Type"] = "application/json"
        return self.client.simulate_request(method, path, headers=hdrs,
                                            body=raw if raw is not None else
                                            (orjson.dumps(body) if body is not None else None))

    def flavor(self, fid="1", name="small", ram=2048, vcpus=2, disk=20):
        r = self.call("POST", "/v2.1/flavors", {"flavor": {"id": fid, "name": name, "ram": ram, "vcpus": vcpus,
                                                           "disk": disk}})
        assert r.status_code == 200, r.text
        return r.json["flavor"]

    def boot(self, name="vm", flavor="1", hints=None, **extra):
        server = {"name": name, "flavorRef": flavor, "imageRef": "cirros", "networks": "none", **extra}
        r = self.call("POST", "/v2.1/servers", {"server": server, **({"os:scheduler_hints": hints} if hints else {})})
        assert r.status_code == 202, r.text
        return r.json["server"]["id"]

    def status(self, uuid: str) -> str:
        return self.call("GET", f"/v2.1/servers/{uuid}").json["server"]["status"]

    def close(self) -> None:
        self.plane.close()


@pytest.fixture
def plane_factory(deployment, api_engine):  # noqa: F811 - the fixture imported above
    made = []

    def make(**kw) -> Plane:
        p = Plane(deployment, api_engine, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()
