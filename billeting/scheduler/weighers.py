"""Weighers: a score per host, normalized, times a multiplier, summed.

Each weigher gives a raw value per host; the values are normalized to
[0, 1] over the hosts being ranked (``minval``/``maxval`` fix an end of the
range when set), multiplied by the weigher's multiplier and summed
(docs/design/filters-and-weighers.md#weighing). A positive multiplier prefers high raw values, a
negative one low values: with the RAM weigher, +1 spreads instances over
the emptiest hosts and -1 packs them onto the fullest. A multiplier can be
overridden per host by aggregate metadata under the option's name; a host
in several such aggregates gets the smallest value.

Costs: every weigher is one pass over the hosts (O(hosts)); the resource
weighers sum the free capacity over the host's tree (a few providers).
A weigher whose multiplier is 0 everywhere is skipped.
"""
from __future__ import annotations

import math
from typing import ClassVar

from billeting.scheduler.decision import Decision
from billeting.scheduler.hoststate import HostState, free_values

REGISTRY: dict[str, type["Weigher"]] = {}


class Weigher:
    name: ClassVar[str]
    option: ClassVar[str]  # the multiplier's setting (and aggregate metadata key)
    minval: ClassVar[float | None] = None
    maxval: ClassVar[float | None] = None
    # What the raw value depends on, so that the later instances of a request
    # recompute only what can have changed: "record" (the host record: once
    # per request), "usage" (free capacity: again for hosts this request
    # claimed on) or "group" (where group members are: again every instance).
    depends: ClassVar[str] = "record"

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # abstract helpers have no name and are not registered
            REGISTRY[cls.name] = cls

    def active(self, decision: Decision) -> bool:
        return True

    def raw(self, host: HostState, decision: Decision) -> float:
        raise NotImplementedError

    def values(self, hosts: list[HostState], decision: Decision) -> list[float]:
        """Raw values of many hosts at once (override when it can be cheaper)."""
        raw = self.raw
        return [raw(h, decision) for h in hosts]

    def multiplier(self, host: HostState, decision: Decision) -> float:
        default = decision.settings.multiplier(self.option)
        if not decision.directory.overrides(self.option):
            return default
        found = None
        for agg in host.record.aggregates:
            value = decision.directory.aggregate_metadata(agg).get(self.option)
            if value is None:
                continue
            try:
                number = float(value)
            except ValueError:
                continue  # unparsable metadata: the configured value stands
            if not math.isfinite(number):
                continue  # "nan" or "inf" would make every weight of the host NaN and its rank arbitrary
            found = number if found is None else min(found, number)
        return default if found is None else found


class _FreeResource(Weigher):
    resource_class: ClassVar[str]
    minval = 0.0
    depends = "usage"

    def raw(self, host, decision):
        return float(host.free(self.resource_class))

    def values(self, hosts, decision):
        return free_values(hosts, self.resource_class)


class RAMWeigher(_FreeResource):
    """Free memory: +1 spreads, -1 packs."""

    name = "RAMWeigher"
    option = "ram_weight_multiplier"
    resource_class = "MEMORY_MB"


class CPUWeigher(_FreeResource):
    """Free vCPUs (allocation ratio included, as Placement reports capacity)."""

    name = "CPUWeigher"
    option = "cpu_weight_multiplier"
    resource_class = "VCPU"


class DiskWeigher(_FreeResource):
    """Free local disk."""

    name = "DiskWeigher"
    option = "disk_weight_multiplier"
    resource_class = "DISK_GB"


class IoOpsWeigher(Weigher):
    """Instances in a busy task state on the host; the default -1 prefers idle hosts."""

    name = "IoOpsWeigher"
    option = "io_ops_weight_multiplier"
    minval = 0.0

    def raw(self, host, decision):
        return float(host.record.num_io_ops)

    def values(self, hosts, decision):
        return [h.record.num_io_ops for h in hosts]


class NumInstancesWeigher(Weigher):
    """Instances on the host (off by default)."""

    name = "NumInstancesWeigher"
    option = "num_instances_weight_multiplier"
    minval = 0.0

    def raw(self, host, decision):
        return float(host.record.num_instances)

    def values(self, hosts, decision):
        return [h.record.num_instances for h in hosts]


class BuildFailureWeigher(Weigher):
    """Hosts whose recent builds failed sink: the raw value is minus the
    count of consecutive failures and the default multiplier (1,000,000) is
    meant to outweigh every other weigher."""

    name = "BuildFailureWeigher"
    option = "build_failure_weight_multiplier"

    def raw(self, host, decision):
        return -float(host.record.failed_builds)

    def values(self, hosts, decision):
        return [-h.record.failed_builds for h in hosts]


def sinks_failed_hosts(settings) -> bool:
    """Whether BuildFailureWeigher is on: then the hosts it would sink that
    run nothing are also the last alternates (``alternates.suspect``)."""
    return settings.multiplier(BuildFailureWeigher.option) > 0


class ServerGroupSoftAffinityWeigher(Weigher):
    """soft-affinity: more members in the host's failure domain is better."""

    name = "ServerGroupSoftAffinityWeigher"
    option = "soft_affinity_weight_multiplier"
    minval = 0.0

    def active(self, decision):
        group = decision.request.server_group
        return group is not None and group.policy == "soft-affinity"

    depends = "group"

    def raw(self, host, decision):
        return float(decision.members_near(host))


class ServerGroupSoftAntiAffinityWeigher(Weigher):
    """soft-anti-affinity: fewer members in the host's failure domain is better."""

    name = "ServerGroupSoftAntiAffinityWeigher"
    option = "soft_anti_affinity_weight_multiplier"

    def active(self, decision):
        group = decision.request.server_group
        return group is not None and group.policy == "soft-anti-affinity"

    depends = "group"

    def raw(self, host, decision):
        return -float(decision.members_near(host))


def default_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def build(names: tuple[str, ...] | None) -> list[Weigher]:
    chosen = default_names() if names is None else names
    unknown = [n for n in chosen if n not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown scheduler weigher(s): {', '.join(unknown)} "
                         f"(available: {', '.join(REGISTRY)})")
    return [REGISTRY[n]() for n in dict.fromkeys(chosen)]
