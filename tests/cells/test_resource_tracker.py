"""What computes report to Placement and to their cell database: provider
trees of every fake shape, inventories with reservations and allocation
ratios, trait rules, generations and conflicts."""
from __future__ import annotations

import uuid as uuidlib

import msgspec
import pytest

from billeting.cells import instances as inst
from billeting.cells import services
from billeting.cells.hosts import host_reports
from billeting.compute.driver import child_uuid, node_uuid
from billeting.compute.fake import DEFAULT_CAPABILITIES, DEFAULT_CPU_TRAITS, DEFAULT_IMAGE_TYPES, FakeConfig
from billeting.compute.reporting import TreeReporter
from billeting.compute.resource_tracker import ResourceTracker
from billeting.compute.settings import ComputeSettings
from billeting.compute.traits import DISABLED
from billeting.placement_client.model import AllocationWrite, Inventory, ProviderResources
from billeting.scheduler.nova import Flavor

from tests.cells.conftest import PROJECT, USER
from tests.support.wait import wait_for


def inventories(placement, rp):
    return placement.get_inventories(rp).inventories


def traits(placement, rp):
    return set(placement.get_traits(rp).traits)


def tree(placement, root):
    return {p.name: p for p in placement.list_providers(in_tree=root)}


def test_a_flat_node_reports_one_root_with_reservations_ratios_and_traits(deployment):
    deployment.compute("h1", config=FakeConfig(vcpus=32, memory_mb=65536, disk_gb=1000))
    root = node_uuid("h1")
    providers = tree(deployment.placement, root)
    assert list(providers) == ["h1"] and providers["h1"].uuid == root
    inv = inventories(deployment.placement, root)
    assert inv == {
        "VCPU": Inventory(total=32, reserved=0, min_unit=1, max_unit=32, step_size=1, allocation_ratio=4.0),
        "MEMORY_MB": Inventory(total=65536, reserved=512, min_unit=1, max_unit=65536, step_size=1,
                               allocation_ratio=1.0),
        "DISK_GB": Inventory(total=1000, reserved=0, min_unit=1, max_unit=1000, step_size=1, allocation_ratio=1.0),
    }
    assert traits(deployment.placement, root) == {"COMPUTE_NODE", "OWNER_NOVA"} | DEFAULT_CAPABILITIES | \
        DEFAULT_CPU_TRAITS | {f"COMPUTE_IMAGE_TYPE_{t}" for t in DEFAULT_IMAGE_TYPES}
    node = services.node(deployment.cells["cell1"].engine, root)
    assert (node.nodename, node.host, node.vcpus, node.memory_mb, node.memory_mb_used) == ("h1", "h1", 32, 65536, 512)


def test_allocation_ratios_follow_option_then_placement_then_initial(deployment):
    compute = deployment.compute("h1")
    root = node_uuid("h1")
    # An operator tunes the ratio in Placement: the compute keeps it.
    current = deployment.placement.get_inventories(root)
    tuned = dict(current.inventories)
    tuned["VCPU"] = msgspec.structs.replace(tuned["VCPU"], allocation_ratio=8.0)
    deployment.placement.put_inventories(root, current.resource_provider_generation, tuned)
    compute.reporter.drop(root)
    compute.update_available_resource()
    assert inventories(deployment.placement, root)["VCPU"].allocation_ratio == 8.0
    # An explicit option overrides even that.
    forced = ResourceTracker("h1", compute.driver, compute.engine, TreeReporter(deployment.placement),
                             ComputeSettings(cpu_allocation_ratio=2.0, ram_allocation_ratio=1.5))
    forced.update_available_resource()
    inv = inventories(deployment.placement, root)
    assert (inv["VCPU"].allocation_ratio, inv["MEMORY_MB"].allocation_ratio, inv["DISK_GB"].allocation_ratio) == (
        2.0, 1.5, 1.0)


def test_disabled_trait_follows_the_service_record(deployment):
    compute = deployment.compute("h1")
    engine = deployment.cells["cell1"].engine
    root = node_uuid("h1")
    assert DISABLED not in traits(deployment.placement, root)
    services.set_disabled(engine, "h1", True, reason="maintenance")
    compute.heartbeat()
    assert DISABLED in traits(deployment.placement, root)
    assert host_reports(engine, cell="cell1")["h1"].enabled is False
    services.set_disabled(engine, "h1", False)
    # The API pushes an enable at once instead of waiting for the heartbeat.
    compute.computes.refresh_service("h1")
    wait_for(lambda: DISABLED not in traits(deployment.placement, root), what="the disabled trait to go")


def test_capability_traits_come_and_go_but_foreign_traits_stay(deployment):
    compute = deployment.compute("h1")
    root = node_uuid("h1")
    client = deployment.placement
    client.ensure_trait("CUSTOM_RACK_SWITCH_7")
    mine = client.get_traits(root)
    assert client.put_traits(root, set(mine.traits) | {"CUSTOM_RACK_SWITCH_7", "HW_CPU_X86_AVX512F"},
                             mine.resource_provider_generation).ok
    compute.driver.set_capabilities(DEFAULT_CAPABILITIES - {"COMPUTE_VOLUME_EXTEND"} | {"COMPUTE_ACCELERATORS"})
    result = compute.update_available_resource()[0]
    assert result.sync.attempts == 2  # the cached generation was stale: re-read, then written
    now = traits(client, root)
    assert "COMPUTE_VOLUME_EXTEND" not in now and "COMPUTE_ACCELERATORS" in now
    assert {"CUSTOM_RACK_SWITCH_7", "HW_CPU_X86_AVX512F"} <= now


def test_an_unchanged_node_costs_no_writes_even_after_a_restart(deployment):
    compute = deployment.compute("h1")
    assert not compute.update_available_resource()[0].sync.changed
    fresh = ResourceTracker("h1", compute.driver, compute.engine, TreeReporter(deployment.placement),
                            ComputeSettings())
    assert not fresh.update_available_resource()[0].sync.changed


def test_numa_shape_puts_cpu_and_memory_on_one_child_per_cell(deployment):
    deployment.compute("h1", config=FakeConfig(shape="numa", vcpus=16, pcpus=8, memory_mb=65536, disk_gb=100,
                                               numa_nodes=2))
    root = node_uuid("h1")
    providers = tree(deployment.placement, root)
    assert set(providers) == {"h1", "h1_numa0", "h1_numa1"}
    assert providers["h1_numa0"].parent_provider_uuid == root
    assert providers["h1_numa0"].uuid == child_uuid(root, "h1_numa0")
    assert set(inventories(deployment.placement, root)) == {"DISK_GB"}
    numa0 = inventories(deployment.placement, providers["h1_numa0"].uuid)
    numa1 = inventories(deployment.placement, providers["h1_numa1"].uuid)
    assert (numa0["VCPU"].total, numa0["PCPU"].total, numa0["MEMORY_MB"].total) == (8, 4, 32768)
    assert (numa0["MEMORY_MB"].reserved, numa1["MEMORY_MB"].reserved) == (512, 0)
    assert numa0["VCPU"].allocation_ratio == 4.0 and numa0["PCPU"].allocation_ratio == 1.0
    assert "HW_NUMA_ROOT" in traits(deployment.placement, providers["h1_numa1"].uuid)
    assert "COMPUTE_NODE" not in traits(deployment.placement, providers["h1_numa1"].uuid)


def test_pci_shape_reports_physical_functions_with_vfs_and_bandwidth(deployment):
    deployment.compute("h1", config=FakeConfig(shape="pci", pfs=2, vfs_per_pf=4, bandwidth_kbps=1000,
                                               physnet="physnet-a"))
    providers = tree(deployment.placement, node_uuid("h1"))
    pfs = sorted(n for n in providers if "_pci_" in n)
    assert len(pfs) == 2
    inv = inventories(deployment.placement, providers[pfs[0]].uuid)
    assert {rc: i.total for rc, i in inv.items()} == {
        "SRIOV_NET_VF": 4, "NET_BW_EGR_KILOBIT_PER_SEC": 1000, "NET_BW_IGR_KILOBIT_PER_SEC": 1000}
    assert {"HW_NIC_SRIOV", "CUSTOM_PHYSNET_PHYSNET_A", "OWNER_NOVA"} <= traits(deployment.placement,
                                                                                providers[pfs[0]].uuid)


def test_vgpu_instances_land_on_a_gpu_child(deployment):
    deployment.compute("h1", config=FakeConfig(shape="vgpu", gpus=2, vgpus_per_gpu=2))
    deployment.conductor()
    flavor = Flavor(vcpus=1, memory_mb=1024, root_gb=1, extra_specs={"resources:VGPU": "1"})
    uuid = deployment.boot(flavor)
    engine = deployment.cells["cell1"].engine
    wait_for(lambda: inst.get(engine, uuid).vm_state is inst.VmState.ACTIVE)
    held = deployment.placement.get_allocations(uuid).as_resources()
    gpus = {p.uuid for p in deployment.placement.list_providers(in_tree=node_uuid("h1")) if "_pci_" in p.name}
    assert [rp for rp, res in held.items() if "VGPU" in res][0] in gpus


def test_ironic_nodes_are_roots_with_one_custom_unit_consumed_whole(deployment):
    compute = deployment.compute("bm", config=FakeConfig(shape="ironic", ironic_nodes=3,
                                                         ironic_class="baremetal.gold", ironic_maintenance=(2,),
                                                         ironic_traits=frozenset({"CUSTOM_RAID5"})))
    deployment.conductor()
    engine = deployment.cells["cell1"].engine
    nodes = compute.driver.node_names()
    assert len(nodes) == 3
    for index, node in enumerate(nodes):
        providers = tree(deployment.placement, node)
        assert list(providers) == [node] and providers[node].uuid == node
        assert inventories(deployment.placement, node) == {"CUSTOM_BAREMETAL_GOLD": Inventory(
            total=1, reserved=1 if index == 2 else 0, min_unit=1, max_unit=1, step_size=1, allocation_ratio=1.0)}
        assert "CUSTOM_RAID5" in traits(deployment.placement, node)
    reports = host_reports(engine, cell="cell1")
    assert set(reports) == set(nodes) and {r.service_host for r in reports.values()} == {"bm"}
    flavor = Flavor(vcpus=1, memory_mb=1024, root_gb=10, extra_specs={
        "resources:CUSTOM_BAREMETAL_GOLD": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0"})
    booted = [deployment.boot(flavor, name=f"bm{i}") for i in range(2)]
    for uuid in booted:
        record = wait_for(lambda: (r := inst.get(engine, uuid)).vm_state is inst.VmState.ACTIVE and r)
        assert record.host == "bm" and record.node in nodes[:2]
        assert deployment.placement.get_allocations(uuid).as_resources() == {
            record.node: {"CUSTOM_BAREMETAL_GOLD": 1}}
    # Both free nodes are taken; the one in maintenance is not offered.
    with pytest.raises(Exception, match="not enough hosts|No valid host|valid host"):
        deployment.schedule(flavor)


def test_a_child_with_allocations_is_kept_when_the_driver_drops_it(deployment):
    compute = deployment.compute("h1", config=FakeConfig(shape="pci", pfs=2, vfs_per_pf=4))
    root = node_uuid("h1")
    pf1 = next(p.uuid for p in deployment.placement.list_providers(in_tree=root) if p.name.endswith("_1"))
    write = AllocationWrite(allocations={pf1: ProviderResources({"SRIOV_NET_VF": 1})}, project_id=PROJECT,
                            user_id=USER, consumer_generation=None)
    assert deployment.placement.put_allocations(str(uuidlib.uuid4()), write).ok
    compute.driver.config = FakeConfig(shape="pci", pfs=1, vfs_per_pf=4)
    report = compute.update_available_resource()[0]
    assert report.error is None and report.sync.in_use == (pf1,)
    assert deployment.placement.get_provider(pf1) is not None
