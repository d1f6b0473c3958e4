"""The operator's opt-in filters: aggregate metadata against the flavor and
project, and per-host load limits; and the extra-spec operators they use."""
from __future__ import annotations

import uuid

import msgspec
import pytest

from billeting.scheduler import NoValidHost, SchedulerSettings
from billeting.scheduler.extra_specs import matches
from billeting.scheduler.filters import default_names
from billeting.scheduler.nova import Flavor, request_from_nova
from tests.scheduler.fleet import memory_catalog, new_uuids

SSD, GOLD = (str(uuid.uuid5(uuid.NAMESPACE_URL, n)) for n in ("ssd-aggregate", "gold-aggregate"))


@pytest.mark.parametrize("value, requirement, expected", [
    ("true", "true", True), ("True", "true", False),
    ("8", "= 4", True), ("2", "= 4", False),            # "=" is numeric at-least
    ("4", "== 4.0", True), ("4", "!= 4", False), ("3", ">= 4", False), ("3", "<= 4", True),
    ("x", ">= 4", False),                              # not a number: no match
    ("abc", "s== abc", True), ("abc", "s< abd", True), ("abc", "s>= abd", False), ("a", "s!= b", True),
    ("avx2,sse4", "<in> avx2", True), ("sse4", "<in> avx2", False),
    ("avx2 sse4 aes", "<all-in> avx2 aes", True), ("avx2", "<all-in> avx2 aes", False),
    ("kvm", "<or> kvm <or> qemu", True), ("xen", "<or> kvm <or> qemu", False),
])
def test_extra_spec_operators(value, requirement, expected):
    assert matches(value, requirement) is expected


def test_the_opt_in_filters_are_off_unless_configured():
    defaults = set(default_names())
    for name in ("AggregateInstanceExtraSpecsFilter", "AggregateMultiTenancyIsolation", "AggregateTypeAffinityFilter",
                 "NumInstancesFilter", "AggregateNumInstancesFilter", "IoOpsFilter", "AggregateIoOpsFilter"):
        assert name not in defaults


def only(*names: str) -> SchedulerSettings:
    return SchedulerSettings(enabled_filters=("ComputeFilter", *names))


def placed(make_scheduler, fleet, settings, flavor: Flavor, *, project: str = "proj", count: int = 6) -> set[str]:
    def select():
        request = request_from_nova(flavor, instance_uuids=new_uuids(1), project_id=project, user_id="u")
        [[sel]] = make_scheduler(settings).select_destinations(request)
        return sel
    return fleet.landing_hosts(select, count)


@pytest.fixture
def zoned(fleet):
    fleet.host("fast", aggregates=(SSD,))
    fleet.host("plain")
    fleet.directory.set_metadata(SSD, {"ssd": "true", "instance_type": "db.large,db.small", "speed": "10"})
    return fleet


def test_aggregate_extra_specs_steer_flavors_to_their_aggregates(zoned, make_scheduler):
    settings = only("AggregateInstanceExtraSpecsFilter")
    wants_ssd = Flavor(vcpus=1, memory_mb=512, name="db", extra_specs={"aggregate_instance_extra_specs:ssd": "true"})
    assert placed(make_scheduler, zoned, settings, wants_ssd) == {"fast"}
    fast_enough = Flavor(vcpus=1, memory_mb=512, extra_specs={"aggregate_instance_extra_specs:speed": ">= 5"})
    assert placed(make_scheduler, zoned, settings, fast_enough) == {"fast"}
    # Other scopes are not this filter's business; a flavor asking for nothing goes anywhere.
    anywhere = Flavor(vcpus=1, memory_mb=512, extra_specs={"hw:cpu_policy": "shared"})
    assert placed(make_scheduler, zoned, settings, anywhere, count=12) == {"fast", "plain"}
    too_much = Flavor(vcpus=1, memory_mb=512, extra_specs={"aggregate_instance_extra_specs:speed": ">= 50"})
    with pytest.raises(NoValidHost, match="2 were in no aggregate whose metadata meets the flavor's extra specs"):
        placed(make_scheduler, zoned, settings, too_much, count=1)
    # Off (the default), metadata steers nothing.
    assert placed(make_scheduler, zoned, None, too_much, count=12) == {"fast", "plain"}


def test_aggregate_type_affinity_keeps_hosts_for_named_flavors(zoned, make_scheduler):
    settings = only("AggregateTypeAffinityFilter")
    assert placed(make_scheduler, zoned, settings, Flavor(vcpus=1, memory_mb=512, name="web"), count=8) == {"plain"}
    assert placed(make_scheduler, zoned, settings, Flavor(vcpus=1, memory_mb=512, name="db.small"),
                  count=12) == {"fast", "plain"}


def test_multi_tenancy_isolation_reserves_hosts_for_projects(fleet, make_scheduler):
    fleet.host("acme-only", aggregates=(GOLD,))
    fleet.host("shared")
    fleet.directory.set_metadata(GOLD, {"filter_tenant_id": "acme, initech"})
    settings = only("AggregateMultiTenancyIsolation")
    flavor = Flavor(vcpus=1, memory_mb=512)
    assert placed(make_scheduler, fleet, settings, flavor, project="other") == {"shared"}
    assert placed(make_scheduler, fleet, settings, flavor, project="initech", count=12) == {"acme-only", "shared"}


def test_load_filters_and_their_aggregate_limits(fleet, make_scheduler):
    fleet.host("busy", aggregates=(GOLD,))
    fleet.host("idle")
    catalog = memory_catalog(fleet)
    for name, instances, io_ops in (("busy", 5, 3), ("idle", 0, 0)):
        uuid_ = fleet.hosts[name]
        record = catalog.records([uuid_])[uuid_]
        catalog.put(msgspec.structs.replace(record, num_instances=instances, num_io_ops=io_ops))
    fleet.directory.set_metadata(GOLD, {"max_instances_per_host": "4", "max_io_ops_per_host": "2"})
    flavor = Flavor(vcpus=1, memory_mb=512)

    def hosts(*names: str, **limits) -> set[str]:
        # (the I/O ops weigher would prefer the idle host whatever the filters say)
        settings = SchedulerSettings(enabled_filters=("ComputeFilter", *names), **limits).with_multipliers(
            io_ops_weight_multiplier=0.0)

        def select():
            request = request_from_nova(flavor, instance_uuids=new_uuids(1), project_id="p", user_id="u")
            [[sel]] = make_scheduler(settings, catalog=catalog).select_destinations(request, alternates=0)
            return sel
        return fleet.landing_hosts(select, 8)

    assert hosts("NumInstancesFilter") == {"busy", "idle"}                # 5 < 50
    assert hosts("NumInstancesFilter", max_instances_per_host=5) == {"idle"}
    assert hosts("AggregateNumInstancesFilter") == {"idle"}               # the aggregate says 4
    assert hosts("IoOpsFilter") == {"busy", "idle"}                       # 3 < 8
    assert hosts("AggregateIoOpsFilter") == {"idle"}                      # the aggregate says 2
