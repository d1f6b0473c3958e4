"""Fixtures for the cell side: cell databases on the run's backend, cells
wired to in-process Placement and a memory bus of their own, fake computes,
a cell conductor, and a stand-in for the API level that schedules with the
real scheduler and hands builds to a cell through ``cells.handoff``."""
from __future__ import annotations

import uuid as uuidlib

import pytest
from sqlalchemy import delete

from billeting.cells import handoff, migrate
from billeting.cells import instances as inst
from billeting.cells import tables as ct
from billeting.cells.hosts import host_reports, merged
from billeting.cells.messages import BuildInstance, InstanceSpec, RequestSummary
from billeting.cells.wiring import CellConfig, CellWiring, wire_cell
from billeting.compute.fake import FakeConfig, FakeDriver
from billeting.compute.manager import ComputeManager
from billeting.compute.service import ComputeService
from billeting.compute.settings import ComputeSettings
from billeting.conductor.cell import CellConductor, ConductorSettings
from billeting.common.db.engine import make_engine
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler import Scheduler
from billeting.scheduler.catalog import PlacementHostCatalog
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler.nova import Flavor, request_from_nova
from billeting.scheduler.settings import SchedulerSettings
from tests.conftest import _create_database

PROJECT = "b5a1c3e2d4f64a1b8c9d0e1f2a3b4c5d"
USER = "0e1f2a3b4c5d4a1b8c9db5a1c3e2d4f6"
SMALL = Flavor(vcpus=2, memory_mb=2048, root_gb=20, name="small")


def wipe_cell(engine) -> None:
    with engine.begin() as conn:
        for table in ct.ALL_TABLES:
            conn.execute(delete(table))


@pytest.fixture
def restore_logging():
    """For tests that run ``billeting`` commands in this process: the command
    points logging at the (captured) stderr of the moment; put it back."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def cell_database_factory(tmp_path_factory):
    """Migrated cell databases on the run's backend, one per name, for the session."""
    made: dict[str, tuple[str, object, object]] = {}

    def make(name: str) -> str:
        if name not in made:
            db = _create_database(tmp_path_factory)
            engine = make_engine(db.url)
            migrate.upgrade(engine)
            made[name] = (db.url, engine, db)
        return made[name][0]

    yield make
    for _url, engine, db in made.values():
        engine.dispose()
        db.drop()


@pytest.fixture
def cell_db(cell_database_factory):
    """The URL of cell1's database, emptied after the test."""
    url = cell_database_factory("cell1")
    yield url
    engine = make_engine(url)
    try:
        wipe_cell(engine)
    finally:
        engine.dispose()


@pytest.fixture
def placement(engine):
    client = InProcessPlacementClient(engine)
    yield client
    client.close()


class Deployment:
    """Cells, their services, and the API level's part played by the test."""

    def __init__(self, placement, cell_database_factory, request) -> None:
        self.placement = placement
        self.factory = cell_database_factory
        self.request = request
        self.cells: dict[str, CellWiring] = {}
        self.computes: dict[str, ComputeService] = {}
        self.conductors: dict[str, CellConductor] = {}
        self.directory = MemoryDirectory()
        self.catalog = PlacementHostCatalog(placement, self.directory, refresh_s=0.0, reports=self.reports)
        self.scheduler = Scheduler(placement, self.catalog, self.directory, SchedulerSettings())

    def cell(self, name: str = "cell1", *, transport_url: str | None = None) -> CellWiring:
        if name not in self.cells:
            url = self.factory(name)
            if transport_url is None and name != "cell0":
                transport_url = f"memory:///{name}-{uuidlib.uuid4().hex[:8]}"
            self.cells[name] = wire_cell(CellConfig(name=name, database_url=url, transport_url=transport_url),
                                         self.placement)
        return self.cells[name]

    def reports(self):
        return merged(host_reports(w.engine, cell=name) for name, w in self.cells.items() if name != "cell0")

    def compute(self, host: str, *, cell: str = "cell1", config: FakeConfig | None = None,
                settings: ComputeSettings | None = None, start: bool = True) -> ComputeManager:
        wiring = self.cell(cell)
        manager = ComputeManager(host, FakeDriver(host, config or FakeConfig(vcpus=16, memory_mb=32768,
                                                                            disk_gb=500)),
                                 wiring, settings or ComputeSettings())
        service = ComputeService(wiring, [manager], periodic=False)
        if start:
            service.start()
        self.computes[host] = service
        return manager

    def conductor(self, cell: str = "cell1", settings: ConductorSettings | None = None) -> CellConductor:
        conductor = CellConductor(self.cell(cell), settings or ConductorSettings(), name=f"conductor-{cell}")
        conductor.start(periodic=False)
        self.conductors[cell] = conductor
        return conductor

    def schedule(self, flavor: Flavor = SMALL, *, count: int = 1, alternates: int = 2, uuids=None, **kw):
        uuids = uuids or [str(uuidlib.uuid4()) for _ in range(count)]
        request = request_from_nova(flavor, instance_uuids=uuids, project_id=PROJECT, user_id=USER, **kw)
        return self.scheduler.select_destinations(request, alternates=alternates)

    def boot(self, flavor: Flavor = SMALL, *, alternates: int = 2, retry: bool = True, selections=None,
             name: str = "vm", unshelve: bool = False):
        """What the super conductor does for one instance: schedule, then hand
        the build to the chosen host's cell (``unshelve``: as an unshelve's
        build). Returns the instance uuid."""
        line = selections if selections is not None else self.schedule(flavor, alternates=alternates)[0]
        chosen = line[0]
        wiring = self.cells[chosen.cell_uuid]
        spec = InstanceSpec(uuid=chosen.consumer_uuid, name=name, flavor=flavor)
        handoff.start_build(wiring.engine, wiring.bus, instance=spec,
                            request=RequestSummary(project_id=PROJECT, user_id=USER, retry=retry,
                                                   unshelve=unshelve),
                            selections=line)
        return chosen.consumer_uuid

    def record_only(self, line, *, retry: bool = True, cell: str = "cell1") -> BuildInstance:
        """The API level recorded the build, then died before casting it."""
        build = BuildInstance(instance=InstanceSpec(uuid=line[0].consumer_uuid, name="vm", flavor=SMALL),
                              request=RequestSummary(project_id=PROJECT, user_id=USER, retry=retry),
                              selection=line[0], alternates=tuple(line[1:]), attempt=1)
        inst.create(self.cells[cell].engine, build)
        return build

    def close(self) -> None:
        for service in self.computes.values():
            service.stop()
        for conductor in self.conductors.values():
            conductor.stop()
        for wiring in self.cells.values():
            if wiring.bus is not None:
                wiring.bus.close()
            wipe_cell(wiring.engine)
            wiring.engine.dispose()


@pytest.fixture
def deployment(placement, cell_database_factory, request):
    d = Deployment(placement, cell_database_factory, request)
    yield d
    d.close()
