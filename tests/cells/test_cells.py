"""Several cells side by side, many computes in one process, and the
periodic work of a running compute."""
from __future__ import annotations

import time
import uuid as uuidlib

from billeting.cells import instances as inst
from billeting.cells import services
from billeting.cells.hosts import host_reports
from billeting.compute.driver import node_uuid
from billeting.compute.fake import FakeConfig, FakeDriver
from billeting.compute.manager import ComputeManager
from billeting.compute.service import ComputeService
from billeting.compute.settings import ComputeSettings
from billeting.placement_client.model import AllocationWrite, ProviderResources
from billeting.scheduler.request import Destination

from tests.cells.conftest import PROJECT, USER
from tests.support.wait import wait_for


def test_each_cell_builds_and_reschedules_within_itself(deployment):
    deployment.compute("a-big", cell="cell1", config=FakeConfig(vcpus=8, memory_mb=65536, disk_gb=100,
                                                                failure_rate=1.0))
    deployment.compute("a-small", cell="cell1", config=FakeConfig(vcpus=8, memory_mb=16384, disk_gb=100))
    deployment.compute("b-big", cell="cell2", config=FakeConfig(vcpus=8, memory_mb=65536, disk_gb=100,
                                                                failure_rate=1.0))
    deployment.compute("b-small", cell="cell2", config=FakeConfig(vcpus=8, memory_mb=16384, disk_gb=100))
    deployment.conductor("cell1")
    deployment.conductor("cell2")
    assert deployment.cells["cell1"].bus.url != deployment.cells["cell2"].bus.url
    placed = {}
    for cell in ("cell1", "cell2"):
        line = deployment.schedule(destination=Destination(cell=cell))[0]
        # The chosen host's cell, and alternates only from that cell.
        assert line[0].cell_uuid == cell and {s.cell_uuid for s in line} == {cell} and len(line) == 2
        placed[cell] = deployment.boot(selections=line)
    for cell, uuid in placed.items():
        engine = deployment.cells[cell].engine
        record = wait_for(lambda: (r := inst.get(engine, uuid)).vm_state is inst.VmState.ACTIVE and r)
        assert record.host == ("a-small" if cell == "cell1" else "b-small")
        other = deployment.cells["cell2" if cell == "cell1" else "cell1"].engine
        assert inst.get(other, uuid) is None


def test_twenty_computes_run_in_one_process(deployment):
    wiring = deployment.cell("cell1")
    managers = [ComputeManager(f"node-{i:02d}", FakeDriver(f"node-{i:02d}", FakeConfig()), wiring, ComputeSettings())
                for i in range(20)]
    service = ComputeService(wiring, managers, periodic=False)
    service.start()
    try:
        reports = host_reports(wiring.engine, cell="cell1")
        assert len(reports) == 20 and all(r.up and r.enabled for r in reports.values())
        roots = {p.uuid for p in deployment.placement.list_providers()}
        assert {node_uuid(f"node-{i:02d}") for i in range(20)} <= roots
        deployment.conductor()
        uuid = deployment.boot()
        wait_for(lambda: inst.get(wiring.engine, uuid).vm_state is inst.VmState.ACTIVE)
    finally:
        service.stop()


def test_a_compute_service_asks_every_host_to_stop_before_waiting_for_any(deployment):
    # Stopping host by host waited out one bus drain each: Ctrl-C on a
    # 20-compute `billeting up` took seconds. Asked together, every consumer
    # and the periodic thread end without anyone joining them one by one.
    wiring = deployment.cell("cell1")
    managers = [ComputeManager(f"quit-{i}", FakeDriver(f"quit-{i}", FakeConfig()), wiring, ComputeSettings())
                for i in range(4)]
    service = ComputeService(wiring, managers)
    service.start()
    threads = [m._server.listener._thread for m in managers] + [service.periodic._thread]
    assert all(t.is_alive() for t in threads)
    try:
        service.request_stop()
        wait_for(lambda: not any(t.is_alive() for t in threads), what="every consumer and the periodic thread ended")
    finally:
        service.stop()


def test_a_running_compute_heartbeats_reports_and_audits_on_its_own(deployment):
    wiring = deployment.cell("cell1")
    settings = ComputeSettings(report_interval_s=0.1, update_resources_interval_s=0.1, audit_interval_s=0.1,
                               orphan_grace_s=0)
    manager = ComputeManager("h1", FakeDriver("h1", FakeConfig()), wiring, settings)
    service = ComputeService(wiring, [manager])
    service.start()
    try:
        first = services.get(wiring.engine, "h1").report_count
        wait_for(lambda: services.get(wiring.engine, "h1").report_count >= first + 3, what="heartbeats")
        before = services.node(wiring.engine, node_uuid("h1")).updated_at
        time.sleep(1.1)  # timestamps may have one-second resolution
        wait_for(lambda: services.node(wiring.engine, node_uuid("h1")).updated_at > before,
                 what="a resource tracker run")
        services.set_disabled(wiring.engine, "h1", True)
        wait_for(lambda: "COMPUTE_STATUS_DISABLED" in deployment.placement.get_traits(node_uuid("h1")).traits,
                 what="the disable to reach Placement")
        stranger = str(uuidlib.uuid4())
        write = AllocationWrite(allocations={node_uuid("h1"): ProviderResources({"VCPU": 1})}, project_id=PROJECT,
                                user_id=USER, consumer_generation=None)
        assert deployment.placement.put_allocations(stranger, write).ok
        wait_for(lambda: not deployment.placement.get_allocations(stranger).allocations,
                 what="the audit to remove an allocation nothing explains")
    finally:
        service.stop()
