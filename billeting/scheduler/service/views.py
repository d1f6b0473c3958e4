"""What the service answers about its objects: typed, ready for msgspec.

The HTTP API encodes these as they are; the CLI decodes them back.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from billeting.apidb.snapshot import AggregateInfo, DomainInfo, Snapshot
from billeting.scheduler.catalog import HostRecord


class DomainView(msgspec.Struct, frozen=True, kw_only=True):
    level: str
    name: str
    aggregate: str            # the Placement aggregate that stands for it
    parent: str | None        # the domain one level wider that holds it
    members: list[str]        # the domains one level narrower it was defined from
    hosts: list[str]          # every host in it, its members' included


class TopologyView(msgspec.Struct, frozen=True, kw_only=True):
    levels: list[str]         # narrowest first, "cell" last
    domains: list[DomainView]


class ZoneView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    # The zone's own aggregate when it was defined here, else the first of ``aggregates``.
    aggregate: str
    hosts: list[str]
    # Every aggregate that puts hosts in the zone: its own, and any other
    # whose metadata names it (e.g. made with the compute API's os-aggregates).
    aggregates: list[str] = []
    defined_here: bool = True


class AggregateView(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    name: str | None
    kind: str                 # "domain", "zone" or "plain"
    metadata: dict[str, str]
    # Hosts the scheduler placed in it (domains and zones; a plain
    # aggregate's members are whatever Placement says).
    hosts: list[str]


class GroupView(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    name: str
    policy: str
    rules: dict[str, int]
    scope: str
    project_id: str
    user_id: str
    members: list[str]
    created_at: str | None


class HostView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    service_host: str | None = None
    cell: str | None = None
    enabled: bool | None = None
    up: bool | None = None           # as the scheduler sees it now (heartbeat age)
    last_heartbeat: str | None = None
    failed_builds: int | None = None
    num_instances: int | None = None
    num_io_ops: int | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    cpu_info: dict[str, Any] | None = None
    supported_instances: tuple[tuple[str, str, str], ...] | None = None
    stats: dict[str, str] | None = None
    updated_at: str | None = None
    # The scheduler's whole record of the host (Placement + directory + report),
    # when Placement has a host of that name.
    record: HostRecord | None = None


def iso(when: dt.datetime | None) -> str | None:
    return when.replace(tzinfo=dt.UTC).isoformat().replace("+00:00", "Z") if when is not None else None


def domain_view(snap: Snapshot, dom: DomainInfo) -> DomainView:
    parent = snap.parent(dom)
    return DomainView(level=dom.level, name=dom.name, aggregate=dom.aggregate_uuid,
                      parent=parent.name if parent else None,
                      members=[c.name for c in snap.children(dom)],
                      hosts=sorted(snap.hosts(dom).values()))


def zone_view(agg: AggregateInfo, others: list[AggregateInfo] = (), other_hosts: set[str] = frozenset()) -> ZoneView:
    """A zone defined here (``agg``) and the ``others`` whose metadata names it too."""
    return ZoneView(name=agg.name or "", aggregate=agg.uuid, hosts=sorted(set(agg.hosts.values()) | other_hosts),
                    aggregates=sorted({agg.uuid, *(o.uuid for o in others)}))


def aggregate_view(snap: Snapshot, agg: AggregateInfo) -> AggregateView:
    dom = snap.domain_of_aggregate(agg.id)
    hosts = snap.hosts(dom) if dom is not None else agg.hosts
    return AggregateView(uuid=agg.uuid, name=agg.name, kind=agg.kind, metadata=dict(sorted(agg.metadata.items())),
                         hosts=sorted(hosts.values()))
