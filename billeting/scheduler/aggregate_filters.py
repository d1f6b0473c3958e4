"""Filters an operator turns on to steer by aggregate metadata and load.

All are off by default (as in Nova): each makes hosts refuse requests that
say nothing about them, which only the operator who set the metadata can
intend. Enable them by name in ``[filter_scheduler] enabled_filters``.
Aggregate metadata comes from the scheduler's directory (any aggregate it
knows, e.g. made with ``os-aggregates``); a value with commas lists several.

Cost 2 (one metadata lookup per aggregate of the host) for the aggregate
filters, 1 (one attribute of the host record) for the load ones; all but the
load filters look at nothing that changes while a request is decided.
"""
from __future__ import annotations

from typing import ClassVar

from billeting.scheduler.extra_specs import matches
from billeting.scheduler.filter_base import Filter

SCOPE = "aggregate_instance_extra_specs"
TENANT_PREFIX = "filter_tenant_id"


def metadata_values(host, decision, key: str) -> set[str]:
    """Every value ``key`` has in the metadata of the host's aggregates."""
    found: set[str] = set()
    for aggregate in host.record.aggregates:
        value = decision.directory.aggregate_metadata(aggregate).get(key)
        if value is not None:
            found.update(v.strip() for v in value.split(","))
    return found


def _wanted_specs(extra_specs) -> dict[str, str]:
    """The flavor's specs this filter reads: scoped to it, or not scoped at all."""
    wanted = {}
    for key, requirement in extra_specs.items():
        scope, _, rest = key.partition(":")
        if not rest:
            wanted[key] = requirement
        elif scope == SCOPE:
            wanted[rest] = requirement
    return wanted


class AggregateInstanceExtraSpecsFilter(Filter):
    """Every flavor extra spec scoped ``aggregate_instance_extra_specs:`` (or
    unscoped) is met by the metadata of one of the host's aggregates."""

    name = "AggregateInstanceExtraSpecsFilter"
    cost = 2
    once_per_request = True
    default_on = False
    explains = "were in no aggregate whose metadata meets the flavor's extra specs"

    def active(self, decision):
        return bool(_wanted_specs(decision.request.extra_specs))

    def passes(self, host, decision):
        wanted = decision.memoized(self.name, lambda: _wanted_specs(decision.request.extra_specs))
        for key, requirement in wanted.items():
            values = metadata_values(host, decision, key)
            if not any(matches(value, requirement) for value in values):
                return False
        return True


class AggregateMultiTenancyIsolation(Filter):
    """A host in an aggregate with ``filter_tenant_id*`` metadata takes only
    those projects; other hosts take anyone."""

    name = "AggregateMultiTenancyIsolation"
    cost = 2
    once_per_request = True
    default_on = False
    explains = "were reserved for other projects"

    def passes(self, host, decision):
        allowed: set[str] = set()
        for aggregate in host.record.aggregates:
            for key, value in decision.directory.aggregate_metadata(aggregate).items():
                if key.startswith(TENANT_PREFIX):
                    allowed.update(v.strip() for v in value.split(","))
        return not allowed or decision.request.project_id in allowed


class AggregateTypeAffinityFilter(Filter):
    """A host in an aggregate with ``instance_type`` metadata takes only the
    flavors it names."""

    name = "AggregateTypeAffinityFilter"
    cost = 2
    once_per_request = True
    default_on = False
    explains = "were kept for other flavors"

    def passes(self, host, decision):
        names = metadata_values(host, decision, "instance_type")
        return not names or decision.request.flavor_name in names


def _aggregate_limit(host, decision, key: str, default: int) -> int:
    """The smallest of the setting and the host's aggregates' ``key`` values."""
    limits = [default]
    for value in metadata_values(host, decision, key):
        try:
            limits.append(int(value))
        except ValueError:
            continue  # (an operator's typo must not take a host out of service)
    return min(limits)


class _LoadLimit(Filter):
    """A counter of the host record below a ``[filter_scheduler]`` limit;
    the aggregate forms take the smallest of it and their metadata's."""

    cost = 1
    default_on = False
    counter: ClassVar[str]         # the HostRecord attribute
    key: ClassVar[str]             # the setting, and the aggregate metadata key
    per_aggregate: ClassVar[bool] = False

    def passes(self, host, decision):
        limit = getattr(decision.settings, self.key)
        if self.per_aggregate:
            limit = _aggregate_limit(host, decision, self.key, limit)
        return getattr(host.record, self.counter) < limit


class NumInstancesFilter(_LoadLimit):
    """Fewer instances than ``max_instances_per_host``."""

    name = "NumInstancesFilter"
    explains = "ran too many instances"
    counter, key = "num_instances", "max_instances_per_host"


class AggregateNumInstancesFilter(NumInstancesFilter):
    name = "AggregateNumInstancesFilter"
    cost = 2
    per_aggregate = True


class IoOpsFilter(_LoadLimit):
    """Fewer I/O-heavy operations in progress than ``max_io_ops_per_host``."""

    name = "IoOpsFilter"
    explains = "had too many I/O operations in progress"
    counter, key = "num_io_ops", "max_io_ops_per_host"


class AggregateIoOpsFilter(IoOpsFilter):
    name = "AggregateIoOpsFilter"
    cost = 2
    per_aggregate = True
