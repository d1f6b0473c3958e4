"""What a fake compute says its hypervisor is and can run reaches the
scheduler: the resource tracker saves it in the compute node row, the
cell's host reports read it, and the capability filters decide on it."""
from __future__ import annotations

import uuid

import pytest

from billeting.cells import services
from billeting.cells.hosts import host_reports
from billeting.compute.driver import node_uuid
from billeting.compute.fake import FakeConfig
from billeting.scheduler import NoValidHost, Scheduler, SchedulerSettings
from billeting.scheduler.nova import Flavor, Image, request_from_nova
from tests.cells.conftest import PROJECT, USER

KVM = FakeConfig(vcpus=16, memory_mb=32768, disk_gb=500, hypervisor_type="QEMU", hypervisor_version=8002000,
                 cpu_features=("avx2", "avx512f"), maxphysaddr_bits=52,
                 supported_instances=(("x86_64", "kvm", "hvm"), ("i686", "kvm", "hvm")), stats={"gpu": "a100"})


def test_the_fake_driver_reports_a_plausible_host_by_default(deployment):
    deployment.compute("plain")
    node = services.node(deployment.cells["cell1"].engine, node_uuid("plain"))
    caps = node.capabilities
    assert node.hypervisor_type == "fake" and caps.hypervisor_version == 1000
    assert caps.supported_instances == (("x86_64", "fake", "hvm"),)
    assert caps.cpu_info["arch"] == "x86_64" and caps.cpu_info["features"] == ["avx2", "sse4.2"]
    assert caps.cpu_info["maxphysaddr"]["bits"] == 46 and caps.stats == {}


def test_reported_capabilities_reach_the_scheduler(deployment):
    deployment.compute("kvm", config=KVM)
    deployment.compute("plain")
    report = host_reports(deployment.cells["cell1"].engine, cell="cell1")["kvm"]
    assert (report.hypervisor_type, report.hypervisor_version, report.stats) == ("QEMU", 8002000, {"gpu": "a100"})
    assert report.supported_instances == (("x86_64", "kvm", "hvm"), ("i686", "kvm", "hvm"))
    record = deployment.catalog.records([node_uuid("kvm")])[node_uuid("kvm")]
    assert record.cpu_info["features"] == ["avx2", "avx512f"] and record.hypervisor_type == "QEMU"

    def chosen(flavor=Flavor(vcpus=1, memory_mb=512), image=None) -> set[str]:
        found = set()
        for _ in range(4):
            [[sel, *_]] = deployment.schedule(flavor, image=image)
            found.add(sel.nodename)
            deployment.placement.delete_allocations(sel.consumer_uuid)
        return found

    specs = {"capabilities:cpu_info:features": "<in> avx512f", "capabilities:hypervisor_version": ">= 8000000"}
    assert chosen(Flavor(vcpus=1, memory_mb=512, extra_specs=specs)) == {"kvm"}
    assert chosen(Flavor(vcpus=1, memory_mb=512, extra_specs={"hw:maxphysaddr_bits": "48"})) == {"kvm"}
    assert chosen(image=Image(properties={"img_hv_type": "kvm", "hw_architecture": "i686"})) == {"kvm"}
    assert chosen(image=Image(properties={"img_hv_type": "fake"})) == {"plain"}
    with pytest.raises(NoValidHost, match="2 could not run the image"):
        deployment.schedule(image=Image(properties={"hw_architecture": "aarch64"}))


def test_a_new_fake_configuration_is_reported_on_the_next_run(deployment):
    manager = deployment.compute("h1")
    manager.driver.config = FakeConfig(hypervisor_type="QEMU", hypervisor_version=7000000)
    manager.update_available_resource()
    report = host_reports(deployment.cells["cell1"].engine, cell="cell1")["h1"]
    assert (report.hypervisor_type, report.hypervisor_version) == ("QEMU", 7000000)
    assert report.supported_instances == (("x86_64", "qemu", "hvm"),)


def image_types(deployment, host: str) -> set[str]:
    return {t for t in deployment.placement.get_traits(node_uuid(host)).traits if t.startswith("COMPUTE_IMAGE_TYPE_")}


def test_the_fake_driver_reports_the_disk_formats_it_boots(deployment):
    """By default what libvirt reports for KVM; --image-types (FakeConfig.image_types)
    changes it, and a format it stops booting loses its trait on the next run."""
    deployment.compute("plain")
    assert image_types(deployment, "plain") == {"COMPUTE_IMAGE_TYPE_AKI", "COMPUTE_IMAGE_TYPE_AMI",
                                                "COMPUTE_IMAGE_TYPE_ARI", "COMPUTE_IMAGE_TYPE_ISO",
                                                "COMPUTE_IMAGE_TYPE_QCOW2", "COMPUTE_IMAGE_TYPE_RAW"}
    manager = deployment.compute("hyperv", config=FakeConfig(image_types=("vhd", "VHDX")))
    assert image_types(deployment, "hyperv") == {"COMPUTE_IMAGE_TYPE_VHD", "COMPUTE_IMAGE_TYPE_VHDX"}
    manager.driver.config = FakeConfig(image_types=())
    manager.update_available_resource()
    assert image_types(deployment, "hyperv") == set()
    with pytest.raises(ValueError, match=r"unknown image type\(s\) qed \(known: aki, ami, ari, iso, ploop"):
        FakeConfig(image_types=("qcow2", "qed"))


def test_image_type_support_finds_the_fake_hosts_that_boot_the_image(deployment):
    """With [scheduler] query_placement_for_image_type_support on, real (fake)
    computes are found for the formats they report, and only those."""
    deployment.compute("kvm")
    deployment.compute("raw-only", config=FakeConfig(vcpus=16, memory_mb=131072, disk_gb=500, image_types=("RAW",)))
    scheduler = Scheduler(deployment.placement, deployment.catalog, deployment.directory,
                          SchedulerSettings(query_placement_for_image_type_support=True))

    def chosen(image: Image, **kw) -> str:
        request = request_from_nova(Flavor(vcpus=1, memory_mb=512, root_gb=1), image, instance_uuids=[
            str(uuid.uuid4())], project_id=PROJECT, user_id=USER, **kw)
        [[sel, *_]] = scheduler.select_destinations(request, claim=False)
        return sel.nodename

    assert chosen(Image(disk_format="qcow2")) == "kvm"
    assert chosen(Image(disk_format="raw")) == "raw-only"  # (more memory: the RAM weigher's pick)
    assert chosen(Image(disk_format="qcow2"), is_bfv=True) == "raw-only"
    with pytest.raises(NoValidHost, match=r"2 lacked trait COMPUTE_IMAGE_TYPE_VMDK \(cannot boot vmdk images\)"):
        chosen(Image(disk_format="vmdk"))
