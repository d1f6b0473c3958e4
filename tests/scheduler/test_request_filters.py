"""Request filters that become query clauses (availability zones, tenant
isolation, disabled computes, guest features) and the fall-back for older
Placements."""
from __future__ import annotations

import random
import uuid

import pytest

from billeting.placement.api.app import make_app
from billeting.placement_client.client import PlacementClient
from billeting.placement_client.transport import WsgiTransport
from billeting.scheduler import NoValidHost, Scheduler, SchedulerSettings
from billeting.scheduler.catalog import PlacementHostCatalog
from billeting.scheduler.nova import Flavor, Image, request_from_nova
from tests.scheduler.fleet import new_uuids

SMALL = Flavor(vcpus=1, memory_mb=1024)
EAST, WEST, ACME = (str(uuid.uuid5(uuid.NAMESPACE_URL, n)) for n in ("east", "west", "acme"))


def req(**kw):
    return request_from_nova(SMALL, instance_uuids=new_uuids(1), project_id=kw.pop("project", "proj"),
                             user_id="user", **kw)


def test_availability_zone_becomes_member_of_and_the_selection_carries_it(fleet, make_scheduler):
    fleet.host("east-1", memory_mb=4096, aggregates=(EAST,))
    fleet.host("west-1", memory_mb=65536, aggregates=(WEST,))
    fleet.directory.add_zone("east", EAST)
    fleet.directory.add_zone("west", WEST)
    [[sel]] = make_scheduler().select_destinations(req(availability_zone="east"))
    assert (sel.nodename, sel.availability_zone) == ("east-1", "east")
    too_big = request_from_nova(Flavor(vcpus=1, memory_mb=8192), instance_uuids=new_uuids(1), project_id="p",
                                user_id="u", availability_zone="east")
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(too_big)
    assert f"member_of=in:{EAST}" in failed.value.explanation.query
    # The zone is named, not its aggregate's uuid.
    assert "1 were outside availability zone 'east'" in failed.value.explanation.message


def test_a_zone_without_aggregates_is_checked_by_the_filter(fleet, make_scheduler):
    fleet.host("a")
    with pytest.raises(NoValidHost, match="1 were outside availability zone 'nowhere'"):
        make_scheduler().select_destinations(req(availability_zone="nowhere"))


def test_tenant_isolation(fleet, make_scheduler):
    fleet.host("shared", memory_mb=65536)
    fleet.host("private", memory_mb=4096, aggregates=(ACME,))
    fleet.directory.add_tenant("acme", ACME)
    off = make_scheduler()
    assert off.select_destinations(req(project="acme"))[0][0].nodename == "shared"
    on = make_scheduler(SchedulerSettings(limit_tenants_to_placement_aggregate=True))
    assert on.select_destinations(req(project="acme"))[0][0].nodename == "private"
    assert on.select_destinations(req(project="other"))[0][0].nodename == "shared"
    strict = make_scheduler(SchedulerSettings(limit_tenants_to_placement_aggregate=True,
                                              placement_aggregate_required_for_tenants=True))
    with pytest.raises(NoValidHost, match="project other has no aggregate"):
        strict.select_destinations(req(project="other"))


def test_an_older_placement_gets_no_root_required_and_disabled_hosts_are_filtered(
        fleet, engine, settings):
    fleet.host("on", memory_mb=2048)
    fleet.host("off", memory_mb=65536, traits=("COMPUTE_STATUS_DISABLED",))
    old = PlacementClient(WsgiTransport(make_app(settings, engine)), version=(1, 31))
    sched = Scheduler(old, PlacementHostCatalog(old, fleet.directory, refresh_s=0), fleet.directory,
                      rng=random.Random(1))
    [[sel]] = sched.select_destinations(req())
    assert sel.nodename == "on" and sel.allocation_request_version == "1.31"
    assert sel.allocation_request.mappings == {}  # no mappings before 1.34
    with pytest.raises(NoValidHost) as failed:
        sched.select_destinations(request_from_nova(Flavor(vcpus=1, memory_mb=8192), instance_uuids=new_uuids(1),
                                                    project_id="p", user_id="u"))
    assert "root_required" not in failed.value.explanation.query


def test_isolated_aggregates_keep_their_hosts_for_requests_requiring_their_traits(fleet, make_scheduler):
    """Spec 2.4 filter 5 (off by default): an aggregate whose metadata says
    trait:T=required takes its hosts away from requests that do not require T."""
    windows = str(uuid.uuid5(uuid.NAMESPACE_URL, "windows"))
    fleet.host("licensed", memory_mb=262144, aggregates=(windows,), traits=("CUSTOM_WINDOWS",))
    fleet.host("linux", memory_mb=4096)
    fleet.directory.set_metadata(windows, {"trait:CUSTOM_WINDOWS": "required", "note": "x"})
    off = make_scheduler()
    assert off.select_destinations(req())[0][0].nodename == "licensed"
    on = make_scheduler(SchedulerSettings(enable_isolated_aggregate_filtering=True))
    assert on.select_destinations(req())[0][0].nodename == "linux"
    windows_image = Image(properties={"trait:CUSTOM_WINDOWS": "required"})
    [[chosen]] = on.select_destinations(request_from_nova(SMALL, windows_image, instance_uuids=new_uuids(1),
                                                          project_id="p", user_id="u"))
    assert chosen.nodename == "licensed"
    # The only host left for a plain request is full: the explanation says
    # where the other went and why.
    big = request_from_nova(Flavor(vcpus=1, memory_mb=8192), instance_uuids=new_uuids(1), project_id="p",
                            user_id="u")
    with pytest.raises(NoValidHost) as failed:
        on.select_destinations(big)
    message = failed.value.explanation.message
    assert (f"1 were in aggregate(s) {windows}, kept for requests that require trait(s) CUSTOM_WINDOWS"
            in message), message


def test_guest_features_choose_the_hosts_that_give_them(fleet, make_scheduler):
    """Spec 2.2 step 7 and the 2.4 filters on whenever asked: a vTPM 2.0 guest,
    a pinned guest with mixed CPUs and a packed-virtqueue guest each land on
    the one host that can give them, though another has far more room."""
    fleet.host("roomy", memory_mb=262144)
    fleet.host("tpm", memory_mb=4096, traits=("COMPUTE_SECURITY_TPM_2_0", "COMPUTE_SECURITY_TPM_TIS"))
    fleet.host("pinned", memory_mb=4096, extra={"PCPU": 8})
    fleet.host("packed", memory_mb=4096, traits=("COMPUTE_NET_VIRTIO_PACKED",))
    sched = make_scheduler()

    def place(flavor, image=None):
        [[chosen]] = sched.select_destinations(request_from_nova(
            flavor, image, instance_uuids=new_uuids(1), project_id="p", user_id="u"))
        return chosen

    assert place(Flavor(vcpus=1, memory_mb=1024, extra_specs={"hw:tpm_version": "2.0"})).nodename == "tpm"
    mixed = place(Flavor(vcpus=4, memory_mb=1024, extra_specs={"hw:cpu_policy": "mixed",
                                                               "hw:cpu_dedicated_mask": "^0"}))
    assert mixed.nodename == "pinned"
    assert mixed.allocation_request.allocations[fleet.hosts["pinned"]].resources == {
        "MEMORY_MB": 1024, "PCPU": 3, "VCPU": 1}
    assert place(SMALL, Image(properties={"hw_virtio_packed_ring": "true"})).nodename == "packed"
    assert place(SMALL).nodename == "roomy"


def test_image_metadata_prefilter_asks_for_the_traits_the_image_needs(fleet, make_scheduler):
    """Spec 2.4 filter 6 (off by default): the image's buses, models and
    architecture become root traits; a value no trait names is skipped."""
    fleet.host("roomy", memory_mb=262144, traits=("COMPUTE_STORAGE_BUS_IDE",))
    fleet.host("virtio", memory_mb=4096, traits=("COMPUTE_STORAGE_BUS_VIRTIO", "COMPUTE_ARCH_AARCH64",
                                                 "COMPUTE_VIOMMU_MODEL_INTEL"))
    # (hw_architecture is left out: ImagePropertiesFilter would want these hosts to report it)
    image = Image(properties={"hw_disk_bus": "virtio", "hw_emulation_architecture": "aarch64",
                              "hw_viommu_model": "intel", "hw_video_model": "no-such-model"})

    def place(settings):
        [[chosen]] = make_scheduler(settings).select_destinations(request_from_nova(
            SMALL, image, instance_uuids=new_uuids(1), project_id="p", user_id="u"))
        return chosen.nodename

    assert place(SchedulerSettings()) == "roomy"
    assert place(SchedulerSettings(image_metadata_prefilter=True)) == "virtio"


def test_image_type_support_sends_an_image_only_where_its_disk_format_boots(fleet, make_scheduler):
    """Spec 2.4 filter 3 (off by default): the image's disk format becomes a
    root trait, so hosts whose driver cannot boot it are never offered; when
    no host can, the explanation names the trait they lack."""
    fleet.host("roomy", memory_mb=262144, traits=("COMPUTE_IMAGE_TYPE_RAW",))
    fleet.host("qcow2", memory_mb=4096, traits=("COMPUTE_IMAGE_TYPE_QCOW2", "COMPUTE_IMAGE_TYPE_RAW"))
    on = SchedulerSettings(query_placement_for_image_type_support=True)

    def place(settings, image, **kw):
        [[chosen]] = make_scheduler(settings).select_destinations(request_from_nova(
            SMALL, image, instance_uuids=new_uuids(1), project_id="p", user_id="u", **kw))
        return chosen.nodename

    qcow2 = Image(id="cirros", disk_format="qcow2")
    assert place(SchedulerSettings(), qcow2) == "roomy"
    assert place(on, qcow2) == "qcow2"
    assert place(on, Image(disk_format="raw")) == "roomy"
    assert place(on, qcow2, is_bfv=True) == "roomy"
    with pytest.raises(NoValidHost) as failed:
        place(on, Image(disk_format="vhd"))
    assert "root_required=COMPUTE_IMAGE_TYPE_VHD" in failed.value.explanation.query
    assert "2 lacked trait COMPUTE_IMAGE_TYPE_VHD (cannot boot vhd images)" in failed.value.explanation.message
    with pytest.raises(NoValidHost, match="disk format 'qed' needs trait COMPUTE_IMAGE_TYPE_QED, which no "
                                          "compute host can report"):
        place(on, Image(disk_format="qed"))


def test_a_pre_filter_registers_by_subclassing_and_runs_in_its_order(fleet, make_scheduler):
    # A plugin module's pre-filter: no edit of the built-in list, picked up
    # by the next request, run after the built-ins that come before it.
    from billeting.scheduler import prefilters

    fleet.host("in-rack", memory_mb=8192)
    fleet.host("elsewhere", memory_mb=65536)  # spread would choose it
    chosen_agg = str(uuid.uuid4())
    fleet.join("in-rack", chosen_agg)
    seen = []

    class OnlyChosenAggregate(prefilters.PreFilter):
        name, order = "OnlyChosenAggregate", 45

        def apply(self, draft, decision, catalog):
            seen.append(draft.limit)
            draft.member_of.append(frozenset({chosen_agg}))

    try:
        [[chosen]] = make_scheduler().select_destinations(req())
        assert chosen.nodename == "in-rack" and seen == [1000]
        names = [p.name for p in prefilters.build_all()]
        assert names.index("OnlyChosenAggregate") == names.index("FailureDomains") + 1
    finally:
        del prefilters.REGISTRY["OnlyChosenAggregate"]
    [[chosen]] = make_scheduler().select_destinations(req())
    assert chosen.nodename == "elsewhere"
