"""Capabilities end to end: fake computes report what their hypervisor is
and can run, the compute API boots servers whose flavor and image ask for
some of it, and the scheduler sends them (and their moves, from the stored
request spec) only where it is found."""
from __future__ import annotations

from billeting.apidb import images
from billeting.compute.fake import FakeConfig
from tests.support.wait import wait_for

KVM = dict(vcpus=16, disk_gb=500, hypervisor_type="QEMU", hypervisor_version=8002000,
           supported_instances=(("x86_64", "kvm", "hvm"),))


def host_of(p, uuid: str, status: str = "ACTIVE") -> str:
    wait_for(lambda: p.status(uuid) == status, what=status)
    return p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["OS-EXT-SRV-ATTR:host"]


def migrate(p, uuid: str) -> None:
    r = p.call("POST", f"/v2.1/servers/{uuid}/action", {"migrate": None},
               headers={"OpenStack-API-Version": "compute 2.90"})
    assert r.status_code == 202, r.text


def test_flavor_and_image_requirements_steer_builds_and_moves(plane_factory):
    p = plane_factory(computes=0)
    # The fake host has the most memory: the RAM weigher would choose it every time.
    p.d.compute("big-fake", config=FakeConfig(vcpus=16, memory_mb=131072, disk_gb=500))
    p.d.compute("kvm1", config=FakeConfig(memory_mb=32768, **KVM))
    p.d.compute("kvm2", config=FakeConfig(memory_mb=16384, **KVM))
    p.flavor(fid="1", name="small", ram=1024, vcpus=1, disk=10)
    p.flavor(fid="2", name="qemu-only", ram=1024, vcpus=1, disk=10)
    r = p.call("POST", "/v2.1/flavors/2/os-extra_specs",
               {"extra_specs": {"capabilities:hypervisor_type": "QEMU"}})
    assert r.status_code == 200, r.text
    images.put(p.api_engine, "kvm-image", name="kvm-image", properties={"img_hv_type": "kvm"})

    assert host_of(p, p.boot(name="plain", flavor="1")) == "big-fake"
    assert host_of(p, p.boot(name="by-flavor", flavor="2")) == "kvm1"
    moving = p.boot(name="by-image", flavor="1", imageRef="kvm-image")
    assert host_of(p, moving) == "kvm1"
    # The move is scheduled from the stored request spec: the image still asks for kvm.
    migrate(p, moving)
    assert host_of(p, moving, "VERIFY_RESIZE") == "kvm2"


def test_image_type_support_from_the_image_catalog_to_the_fake_computes(plane_factory):
    """Request filter 3 end to end: the catalog's disk format reaches the
    scheduler with the build and, from the stored request spec, with the
    move; hosts whose driver cannot boot it are passed over, and an image
    no host boots ends in ERROR with the missing trait named."""
    from billeting.scheduler.settings import SchedulerSettings

    p = plane_factory(computes=0, scheduler_settings=SchedulerSettings(query_placement_for_image_type_support=True))
    # The RAM weigher would choose the raw-only host every time.
    p.d.compute("raw-only", config=FakeConfig(vcpus=16, memory_mb=131072, disk_gb=500, image_types=("RAW",)))
    p.d.compute("kvm1", config=FakeConfig(vcpus=16, memory_mb=32768, disk_gb=500))
    p.d.compute("kvm2", config=FakeConfig(vcpus=16, memory_mb=16384, disk_gb=500))
    p.flavor(fid="1", name="small", ram=1024, vcpus=1, disk=10)
    images.put(p.api_engine, "qcow2-image", name="qcow2-image", disk_format="qcow2")
    images.put(p.api_engine, "vhd-image", name="vhd-image", disk_format="vhd")

    assert host_of(p, p.boot(name="no-format", flavor="1")) == "raw-only"  # cirros names no disk format
    moving = p.boot(name="qcow2", flavor="1", imageRef="qcow2-image")
    assert host_of(p, moving) == "kvm1"
    migrate(p, moving)
    assert host_of(p, moving, "VERIFY_RESIZE") == "kvm2"
    refused = p.boot(name="vhd", flavor="1", imageRef="vhd-image")
    wait_for(lambda: p.status(refused) == "ERROR", what="ERROR")
    fault = p.call("GET", f"/v2.1/servers/{refused}").json["server"]["fault"]
    assert "No valid host" in fault["message"] and "lacked trait COMPUTE_IMAGE_TYPE_VHD" in fault["message"]
