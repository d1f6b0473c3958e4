"""The state of one request while it is being decided.

Filters and weighers read it; the scheduler updates it after each claim so
that the next instance of a multi-instance request sees its siblings (they
count as server-group members and as chosen hosts, docs/design/select-destinations.md#after-a-claim).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from billeting.scheduler.directory import Directory
from billeting.scheduler.hoststate import HostState
from billeting.scheduler.request import HOST_SCOPE, ScheduleRequest
from billeting.scheduler.settings import SchedulerSettings


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Aggregates the candidates query keeps out (``member_of=!in:``) and why,
    worded for a "no valid host" explanation: its hosts "were in ``where``,
    ``why``"."""

    aggregates: frozenset[str]
    where: str  # "rack r1, rack r2"
    why: str  # "which each already hold 1 member of server group G, the most its anti-affinity per rack allows"


@dataclass(slots=True)
class Decision:
    request: ScheduleRequest
    settings: SchedulerSettings
    directory: Directory
    index: int = 0  # position of the instance being placed within the request
    version: str = ""  # the Placement microversion the candidates came from
    # Server group: members per host, and per domain at the group's scope level.
    group_hosts: Counter = field(default_factory=Counter)
    group_domains: Counter = field(default_factory=Counter)
    # ... and per cell (anti-affinity breaks weight ties towards the emptiest cell).
    group_cells: Counter = field(default_factory=Counter)
    # Hosts running the instances named by same_host / different_host hints.
    same_hosts: frozenset[str] = frozenset()
    different_hosts: frozenset[str] = frozenset()
    # Domain names that "same"/"different" <level> constraints resolved to,
    # keyed by (relation, level).
    domain_targets: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # What the candidates query excludes, and why (set by query.build).
    exclusions: list[Exclusion] = field(default_factory=list)
    # Hosts chosen for earlier instances of this request, in order.
    chosen: list[str] = field(default_factory=list)
    # Weigher name → host uuid → multiplier (they cannot change within a request).
    multiplier_cache: dict[str, dict[str, float]] = field(default_factory=dict)
    # Weigher name → host uuid → raw value, kept while what it depends on is unchanged.
    raw_cache: dict[str, dict[str, float]] = field(default_factory=dict)
    # The same values as arrays for the last list of hosts ranked (a pipeline.RawFrame).
    raw_frame: object = None
    # Filter name → what it read from the request (parsed once, used for every host).
    memo: dict[str, object] = field(default_factory=dict)

    # Set by the scheduler once host states exist: whose free capacity this
    # request's claims changed since the last weighing.
    consumption: object = None

    def memoized(self, key: str, make):
        """What ``make()`` reads from the request, made once per request."""
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = make()
        return found

    def consumption_changed(self) -> set[str]:
        if self.consumption is None:
            return set()
        changed = set(self.consumption.changed)
        self.consumption.changed.clear()
        return changed

    @property
    def instance_uuid(self) -> str:
        return self.request.instance_uuids[self.index]

    @property
    def group_scope(self) -> str:
        group = self.request.server_group
        return group.scope if group is not None else HOST_SCOPE

    def members_near(self, host: HostState) -> int:
        """Group members in the host's failure domain at the group's scope."""
        scope = self.group_scope
        if scope == HOST_SCOPE:
            return self.group_hosts[host.uuid]
        domain = host.domains.get(scope)
        return self.group_domains[domain] if domain is not None else 0

    def placed(self, host: HostState) -> None:
        """Record that the current instance was claimed on ``host``."""
        self.chosen.append(host.uuid)
        if self.request.server_group is not None:
            self.group_hosts[host.uuid] += 1
            self.group_cells[host.record.cell_uuid] += 1
            domain = host.domains.get(self.group_scope)
            if domain is not None:
                self.group_domains[domain] += 1
