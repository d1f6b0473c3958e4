"""The hypervisor's capabilities against the flavor and the image:
ComputeCapabilitiesFilter and ImagePropertiesFilter, on hand-made host
records, then through ``request_from_nova`` against a real Placement."""
from __future__ import annotations

import json

import msgspec
import pytest

from billeting.placement_client.model import AllocationRequest, Capacity, ProviderResources, ProviderSummary
from billeting.scheduler import NoValidHost, SchedulerSettings
from billeting.scheduler.capability_filters import (
    ComputeCapabilitiesFilter,
    ImagePropertiesFilter,
    capability,
    version_of,
    version_predicate,
)
from billeting.scheduler.catalog import HostRecord
from billeting.scheduler.decision import Decision
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler.filters import default_names
from billeting.scheduler.hoststate import Consumption, HostState
from billeting.scheduler.nova import Flavor, Image, request_from_nova
from billeting.scheduler.request import RequestGroup, ScheduleRequest
from tests.scheduler.fleet import memory_catalog, new_uuids

CPU_INFO = {"arch": "x86_64", "model": "Cascadelake-Server", "vendor": "Intel",
            "topology": {"sockets": 2, "cores": 16, "threads": 2},
            "features": ["avx2", "avx512f", "sse4.2"], "maxphysaddr": {"mode": "passthrough", "bits": 46}}
KVM = HostRecord(uuid="u-kvm", name="kvm", service_host="kvm", cell_uuid="c1", hypervisor_type="QEMU",
                 hypervisor_version=6002000, cpu_info=CPU_INFO,
                 supported_instances=(("x86_64", "kvm", "hvm"), ("i686", "kvm", "hvm")),
                 stats={"gpu_model": "a100", "cores_free": "12", "numa": json.dumps({"cells": {"0": {"mem": 64}}})})
BARE = HostRecord(uuid="u-bare", name="bare", service_host="bare", cell_uuid="c1")


def state(record: HostRecord) -> HostState:
    summary = ProviderSummary(resources={"VCPU": Capacity(8, 0)}, root_provider_uuid=record.uuid)
    return HostState(record, [record.uuid], {record.uuid: summary}, Consumption(),
                     [AllocationRequest({record.uuid: ProviderResources({"VCPU": 1})})], {})


def decision(*, specs=None, image=None, settings=None) -> Decision:
    request = ScheduleRequest(instance_uuids=("i1",), project_id="p", user_id="u",
                              groups=(RequestGroup(resources={"VCPU": 1}),), extra_specs=specs or {},
                              image_properties=image or {})
    return Decision(request, settings or SchedulerSettings(), MemoryDirectory())


def caps(record: HostRecord, **specs: str) -> bool | None:
    """Does the capabilities filter take ``record``? None: the filter is not active."""
    f, d = ComputeCapabilitiesFilter(), decision(specs={k.replace("__", ":"): v for k, v in specs.items()})
    return f.passes(state(record), d) if f.active(d) else None


def image(record: HostRecord, settings=None, **props: str) -> bool | None:
    f, d = ImagePropertiesFilter(), decision(image=props, settings=settings)
    return f.passes(state(record), d) if f.active(d) else None


def test_both_filters_are_on_by_default():
    assert {"ComputeCapabilitiesFilter", "ImagePropertiesFilter"} <= set(default_names())


@pytest.mark.parametrize("key, requirement, expected", [
    ("capabilities:hypervisor_type", "QEMU", True),
    ("capabilities:hypervisor_type", "s== qemu", False),
    ("capabilities:hypervisor_type", "<or> xen <or> QEMU", True),
    ("capabilities:hypervisor_version", ">= 6000000", True),
    ("capabilities:hypervisor_version", "= 7000000", False),          # "=" is numeric at-least
    ("capabilities:cpu_info:vendor", "Intel", True),
    ("capabilities:cpu_info:topology:threads", "== 2", True),
    ("capabilities:cpu_info:topology:sockets", ">= 4", False),
    ("capabilities:cpu_info:features", "<in> avx512f", True),
    ("capabilities:cpu_info:features", "<all-in> avx2 sse4.2", True),
    ("capabilities:cpu_info:features", "<all-in> avx2 amx", False),
    ("capabilities:cpu_info:maxphysaddr:bits", ">= 40", True),
    ("capabilities:supported_instances", "<in> kvm", True),
])
def test_capability_specs_walk_the_host_and_use_the_extra_spec_operators(key, requirement, expected):
    assert caps(KVM, **{key: requirement}) is expected


def test_a_name_no_attribute_has_is_looked_up_in_stats_and_json_text_is_walked_into():
    assert caps(KVM, capabilities__gpu_model="a100") is True
    assert caps(KVM, capabilities__stats__gpu_model="a100") is True
    assert caps(BARE, capabilities__stats__gpu_model="a100") is False
    assert caps(KVM, capabilities__cores_free=">= 16") is False
    assert caps(KVM, capabilities__numa__cells__0__mem=">= 32") is True
    assert capability(KVM, ("numa", "cells", "0", "mem")) == 64
    # Not JSON, or not an object: nothing there.
    odd = msgspec.structs.replace(KVM, stats={"flag": "{not json", "count": "3"})
    assert capability(odd, ("flag", "x")) is None and capability(odd, ("count", "x")) is None
    assert capability(KVM, ("supported_instances", "0")) is None  # (a list is not walked into)


def test_a_path_that_finds_nothing_fails_the_host():
    assert caps(KVM, capabilities__cpu_info__no_such="x") is False
    assert caps(KVM, capabilities__no_such_stat="x") is False
    assert caps(KVM, capabilities__hypervisor_type__deeper="x") is False  # "QEMU" is no JSON object


def test_unscoped_keys_are_checked_only_when_they_name_a_capability_or_a_stat():
    assert caps(KVM, hypervisor_type="QEMU") is True
    assert caps(KVM, hypervisor_type="xen") is False
    assert caps(KVM, gpu_model="a100") is True and caps(KVM, gpu_model="h100") is False
    # A key the host has no stat for is somebody else's: the host passes.
    assert caps(KVM, group_policy="isolate") is True
    assert caps(BARE, gpu_model="h100") is True
    # Other scopes are not this filter's business: with nothing else, it is not even run.
    assert caps(KVM, **{"hw:cpu_policy": "dedicated", "trait:HW_CPU_X86_AVX2": "required",
                        "resources:VGPU": "1", "aggregate_instance_extra_specs:ssd": "true"}) is None


def test_a_host_without_capabilities_passes_only_flavors_that_ask_for_none():
    assert caps(BARE, **{"hw:cpu_policy": "dedicated"}) is None
    assert caps(BARE, capabilities__hypervisor_type="QEMU") is False
    assert caps(BARE, hypervisor_type="QEMU") is False   # it names an attribute: checked, and missing
    assert caps(BARE, capabilities__cpu_info__vendor="Intel") is False


def test_maxphysaddr_bits_is_at_least_when_the_host_reports_it():
    assert caps(KVM, **{"hw:maxphysaddr_bits": "46"}) is True
    assert caps(KVM, **{"hw:maxphysaddr_bits": "48"}) is False
    assert caps(BARE, **{"hw:maxphysaddr_bits": "48"}) is True        # not reported: not checked
    assert caps(KVM, **{"hw:maxphysaddr_bits": "lots"}) is None       # not a count: ignored


def test_image_architecture_hypervisor_type_and_vm_mode_match_one_supported_triple():
    assert image(KVM, hw_architecture="x86_64") is True
    assert image(KVM, hw_architecture="AMD64", img_hv_type="KVM", hw_vm_mode="hv") is True  # other spellings
    assert image(KVM, hw_architecture="i386", img_hv_type="kvm") is True  # the second triple
    assert image(KVM, hw_architecture="aarch64") is False
    assert image(KVM, img_hv_type="xen") is False
    assert image(KVM, hw_architecture="i686", hw_vm_mode="xen") is False
    # One triple must give all three: x86_64 from one and exe from none is no match.
    assert image(KVM, hw_vm_mode="exe") is False
    # An image that names none of them runs anywhere, even on a host that reports nothing.
    assert image(KVM, os_distro="ubuntu") is None
    assert image(BARE, os_distro="ubuntu") is None
    assert image(BARE, hw_architecture="x86_64") is False


def test_the_default_architecture_applies_to_images_that_name_none():
    arm = SchedulerSettings(image_properties_default_architecture="aarch64")
    assert image(KVM, arm, os_distro="ubuntu") is False
    assert image(KVM, arm, hw_architecture="x86_64") is True         # the image's own wins
    assert image(BARE, arm, os_distro="ubuntu") is False             # reports nothing: cannot show aarch64
    x86 = SchedulerSettings(image_properties_default_architecture="x86_64")
    assert image(KVM, x86) is True


@pytest.mark.parametrize("requirement, expected", [
    (">=6.0", True), (">= 6.2.0", True), (">6.2", False), ("<7", True), (">=6.0, <6.2", False),
    ("==6.2", True), ("6.2.0", True), ("!=6.2", False), (">=7.0", False), ("newest", False),
])
def test_requested_hypervisor_version(requirement, expected):
    assert image(KVM, img_hv_requested_version=requirement) is expected
    assert image(BARE, img_hv_requested_version=requirement) is True  # no version reported: not checked


def test_version_helpers():
    assert version_of(6002000) == (6, 2, 0) and version_of(1000) == (1, 0) and version_of(7) == (7,)
    assert version_predicate(">=1.0")((1, 0)) and not version_predicate("<1")((1, 0, 1))


def test_image_maxphysaddr_bits_must_not_exceed_the_hosts():
    assert image(KVM, hw_maxphysaddr_bits="46") is True
    assert image(KVM, hw_maxphysaddr_bits="47") is False
    assert image(BARE, hw_maxphysaddr_bits="52") is True


def test_the_request_is_read_once_not_per_host():
    f, d = ComputeCapabilitiesFilter(), decision(specs={"capabilities:hypervisor_type": "QEMU"})
    assert f.active(d)
    first = d.memo[f.name]
    assert [f.passes(state(r), d) for r in (KVM, BARE, KVM)] == [True, False, True]
    assert d.memo[f.name] is first


# --- through request_from_nova, against Placement ---------------------------------------

@pytest.fixture
def capable_fleet(fleet):
    """Three hosts of one size; only "kvm" reports a KVM hypervisor with AVX-512."""
    for name in ("kvm", "xen", "silent"):
        fleet.host(name)
    catalog = memory_catalog(fleet)
    for name, facts in (("kvm", dict(hypervisor_type="QEMU", hypervisor_version=6002000, cpu_info=CPU_INFO,
                                     supported_instances=(("x86_64", "kvm", "hvm"),), stats={"gpu": "a100"})),
                        ("xen", dict(hypervisor_type="Xen", hypervisor_version=4016000,
                                     cpu_info={"vendor": "Intel", "features": ["avx2"]},
                                     supported_instances=(("x86_64", "xen", "xen"), ("x86_64", "xen", "hvm"))))):
        uuid = fleet.hosts[name]
        catalog.put(msgspec.structs.replace(catalog.records([uuid])[uuid], **facts))
    return fleet, catalog


def placed(make_scheduler, fleet, flavor, image=None, settings=None, count=6) -> set[str]:
    fleet, catalog = fleet

    def select():
        request = request_from_nova(flavor, image, instance_uuids=new_uuids(1), project_id="p", user_id="u")
        [[sel]] = make_scheduler(settings, catalog=catalog).select_destinations(request)
        return sel
    return fleet.landing_hosts(select, count)


def test_only_the_host_with_the_capabilities_is_chosen(capable_fleet, make_scheduler):
    catalog = capable_fleet
    anywhere = Flavor(vcpus=1, memory_mb=512)
    assert placed(make_scheduler, catalog, anywhere, count=30) == {"kvm", "xen", "silent"}
    avx512 = Flavor(vcpus=1, memory_mb=512, extra_specs={"capabilities:cpu_info:features": "<in> avx512f"})
    assert placed(make_scheduler, catalog, avx512) == {"kvm"}
    # An unscoped key binds only the hosts that have such a stat.
    other_gpu = Flavor(vcpus=1, memory_mb=512, extra_specs={"gpu": "h100"})
    assert placed(make_scheduler, catalog, other_gpu, count=20) == {"xen", "silent"}
    none = Flavor(vcpus=1, memory_mb=512, extra_specs={"capabilities:hypervisor_type": "Hyper-V"})
    with pytest.raises(NoValidHost) as failed:
        placed(make_scheduler, catalog, none, count=1)
    explanation = failed.value.explanation
    assert "3 lacked the capabilities the flavor's extra specs ask for" in explanation.message
    assert [(f.filter, f.removed) for f in explanation.filters] == [("ComputeCapabilitiesFilter", 3)]


def test_only_the_host_that_runs_the_image_is_chosen(capable_fleet, make_scheduler):
    catalog = capable_fleet
    flavor = Flavor(vcpus=1, memory_mb=512)
    pv = Image(properties={"hw_vm_mode": "xen"})
    assert placed(make_scheduler, catalog, flavor, pv) == {"xen"}
    recent = Image(properties={"img_hv_type": "kvm", "img_hv_requested_version": ">=6.0"})
    assert placed(make_scheduler, catalog, flavor, recent) == {"kvm"}
    # The default architecture shuts out the host that reports no supported instances.
    x86 = SchedulerSettings(image_properties_default_architecture="x86_64")
    assert placed(make_scheduler, catalog, flavor, None, x86, count=20) == {"kvm", "xen"}
    arm = Image(properties={"hw_architecture": "aarch64"})
    with pytest.raises(NoValidHost) as failed:
        placed(make_scheduler, catalog, flavor, arm, count=1)
    assert [(f.filter, f.removed) for f in failed.value.explanation.filters] == [("ImagePropertiesFilter", 3)]
    assert "3 could not run the image" in failed.value.explanation.message


def test_the_request_carries_the_image_properties_across_the_wire():
    request = request_from_nova(Flavor(vcpus=1, memory_mb=512), Image(properties={"hw_architecture": "x86_64"}),
                                instance_uuids=new_uuids(1), project_id="p", user_id="u")
    assert request.image_properties == {"hw_architecture": "x86_64"}
    again = msgspec.json.decode(msgspec.json.encode(request), type=ScheduleRequest)
    assert again.image_properties == {"hw_architecture": "x86_64"}
    assert request_from_nova(Flavor(vcpus=1, memory_mb=512), instance_uuids=new_uuids(1), project_id="p",
                             user_id="u").image_properties == {}
