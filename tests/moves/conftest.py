"""A cell with three fake computes of different sizes (so the RAM weigher
ranks them h1 > h2 > h3), in-process Placement on the run's backend, the
real scheduler and the move tasks, plus the checks every move test makes."""
from __future__ import annotations

import threading
import uuid as uuidlib
from collections import Counter

import pytest

from billeting.cells import instances as inst
from billeting.cells import moves as migrations
from billeting.cells import services
from billeting.cells.instances import VmState
from billeting.compute.fake import FakeConfig, FakeDriver
from billeting.compute.manager import ComputeManager
from billeting.compute.service import ComputeService
from billeting.compute.settings import ComputeSettings
from billeting.conductor.move_protocols import CellHandle, StoredRequestSpec
from billeting.conductor.moves import ConductorMoveTasks
from billeting.conductor.wiring import TaskWiring
from billeting.scheduler.nova import Flavor

from tests.cells.conftest import (  # noqa: F401 - fixtures
    PROJECT,
    USER,
    Deployment,
    cell_database_factory,
    placement,
)
from tests.support.wait import wait_for

SMALL = Flavor(vcpus=2, memory_mb=2048, root_gb=20, name="small")
LARGE = Flavor(vcpus=4, memory_mb=4096, root_gb=40, name="large")
SIZES = {"h1": 65536, "h2": 32768, "h3": 16384}


class GatedDriver(FakeDriver):
    """A fake driver whose builds wait until the test opens the gate, so a
    test can look at a move while it is in flight."""

    def __init__(self, host, config) -> None:
        super().__init__(host, config)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def spawn(self, instance, nodename, allocation, stop):
        if not self.gate.is_set():
            self.waiting.set()
            while not self.gate.wait(0.02):
                if stop.is_set():
                    break
        super().spawn(instance, nodename, allocation, stop)


class Directory:
    def __init__(self, deployment: Deployment) -> None:
        self.d = deployment

    def cells(self):
        return {name: CellHandle(name=name, engine=w.engine, bus=w.bus) for name, w in self.d.cells.items()
                if name != "cell0"}

    def cell_of(self, instance_uuid):
        for name, w in self.d.cells.items():
            if inst.get(w.engine, instance_uuid) is not None:
                return name
        return None


class Specs:
    def __init__(self) -> None:
        self.specs: dict[str, StoredRequestSpec] = {}

    def get(self, instance_uuid):
        return self.specs.get(instance_uuid)

    def save(self, spec):
        self.specs[spec.instance_uuid] = spec


class World:
    def __init__(self, deployment: Deployment) -> None:
        self.d = deployment
        self.wiring = deployment.cell("cell1")
        self.engine = self.wiring.engine
        self.placement = deployment.placement
        self.drivers: dict[str, GatedDriver] = {}
        self.specs = Specs()
        self.tasks = ConductorMoveTasks(TaskWiring(cells=Directory(deployment), specs=self.specs,
                                                   scheduler=deployment.scheduler, placement=deployment.placement))

    def compute(self, host: str, *, failure_rate: float = 0.0, guests: dict[str, str] | None = None
                ) -> ComputeManager:
        driver = GatedDriver(host, FakeConfig(vcpus=16, memory_mb=SIZES[host], disk_gb=500,
                                              failure_rate=failure_rate))
        driver._guests.update(guests or {})
        self.drivers[host] = driver
        manager = ComputeManager(host, driver, self.wiring, ComputeSettings())
        service = ComputeService(self.wiring, [manager], periodic=False)
        service.start()
        self.d.computes[host] = service
        return manager

    def down(self, host: str) -> None:
        self.d.computes[host].stop()
        services.set_forced_down(self.engine, host, True)

    def restart(self, host: str) -> ComputeManager:
        """The host comes back (its hypervisor kept the guests it had)."""
        services.set_forced_down(self.engine, host, False)
        return self.compute(host, guests=self.drivers[host].guests())

    def boot(self, flavor: Flavor = SMALL) -> str:
        uuid = self.d.boot(flavor)
        wait_for(lambda: self.record(uuid).vm_state is VmState.ACTIVE, what=f"{uuid} to be active")
        self.specs.save(StoredRequestSpec(instance_uuid=uuid, project_id=PROJECT, user_id=USER, flavor=flavor))
        return uuid

    def record(self, uuid: str) -> inst.InstanceRecord:
        return inst.get(self.engine, uuid)

    def migration(self, uuid: str) -> migrations.MigrationRecord:
        return migrations.get(self.engine, uuid)

    def held(self, consumer: str) -> dict[str, dict[str, int]]:
        return self.placement.get_allocations(consumer).as_resources()

    def node(self, host: str) -> str:
        return self.drivers[host].node_facts(host).uuid

    def on(self, host: str, flavor: Flavor) -> dict[str, dict[str, int]]:
        """The allocation ``flavor`` makes on ``host``'s (flat) provider."""
        return {self.node(host): resources(flavor)}

    def settled(self, uuid: str, vm_state: VmState) -> inst.InstanceRecord:
        return wait_for(lambda: (r := self.record(uuid)).vm_state is vm_state and r.task_state is None and r,
                        what=f"{uuid} to settle in {vm_state.value}")

    def usages(self) -> Counter:
        total: Counter = Counter()
        for host in self.drivers:
            for part in self.placement.provider_allocations(self.node(host)).allocations.values():
                total.update(part.resources)
        return +total

    def expected_usages(self, *, doubled: tuple[str, ...] = ()) -> Counter:
        """The invariant: the flavors of the instances that hold resources —
        active and building ones, a resized one twice (its new flavor on the
        destination, its old one held by the migration on the source), an
        evacuated one whose source has not come back twice."""
        total: Counter = Counter()
        for record in inst.listing(self.engine):
            if record.vm_state in (VmState.ACTIVE, VmState.BUILDING):
                total.update(resources(record.flavor))
            elif record.vm_state is VmState.RESIZED:
                total.update(resources(record.flavor))
                finished = [m for m in migrations.for_instance(self.engine, record.uuid) if m.status == "finished"]
                assert len(finished) == 1
                total.update(resources(finished[0].old_flavor))
            if record.uuid in doubled:
                total.update(resources(record.flavor))
        return +total

    def check_invariant(self, **kw) -> None:
        assert self.usages() == self.expected_usages(**kw)


def resources(flavor: Flavor) -> dict[str, int]:
    return {"VCPU": flavor.vcpus, "MEMORY_MB": flavor.memory_mb, "DISK_GB": flavor.root_gb}


@pytest.fixture
def world(placement, cell_database_factory, request):  # noqa: F811
    d = Deployment(placement, cell_database_factory, request)
    w = World(d)
    try:
        yield w
    finally:
        for driver in w.drivers.values():
            driver.gate.set()
        d.close()


@pytest.fixture
def three(world):
    """h1, h2, h3 running and a cell conductor."""
    for host in SIZES:
        world.compute(host)
    world.d.conductor()
    return world


def new_uuid() -> str:
    return str(uuidlib.uuid4())
