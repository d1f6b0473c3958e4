"""Host records: what the scheduler knows about a host besides its capacity.

Capacity comes from Placement's provider summaries, which are exactly what
a claim will be checked against. Everything else a filter or weigher needs
(name, cell, zone, enabled/up, recent build failures, instance counts, the
aggregates it belongs to, what its hypervisor is and can run) comes from a
``HostCatalog``. The default reads Placement itself (root providers and the
membership of the aggregates the directory knows) plus an optional overlay
of host reports (the catalog table); the control plane plugs in one that
reads its cell databases.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

import msgspec

from billeting.placement_client.client import PlacementClient
from billeting.scheduler.directory import CELL_LEVEL, Directory

DEFAULT_ZONE = "nova"
DEFAULT_CELL = "cell1"
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"

# (architecture, hypervisor type, vm mode): one kind of guest a host can run.
SupportedInstance = tuple[str, str, str]
# The capability facts the stores (host reports, compute nodes) keep as JSON text.
CAPABILITY_JSON = ("cpu_info", "supported_instances", "stats")


def json_text(value) -> str | None:
    """A capability fact as its column keeps it (None: not reported)."""
    return msgspec.json.encode(value).decode() if value is not None else None


def json_facts(row) -> dict[str, Any]:
    """The JSON-text capability columns of ``row`` that hold something, decoded."""
    return {name: msgspec.json.decode(text) for name in CAPABILITY_JSON if (text := getattr(row, name)) is not None}


class HostRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    uuid: str              # compute node uuid = root resource provider uuid
    name: str              # node name (hypervisor hostname; an Ironic node's uuid)
    service_host: str      # the compute service that runs the node
    cell_uuid: str
    availability_zone: str = DEFAULT_ZONE
    enabled: bool = True
    up: bool = True
    aggregates: frozenset[str] = frozenset()
    failed_builds: int = 0    # consecutive failed builds, reset by a success
    num_instances: int = 0
    num_io_ops: int = 0
    # What the hypervisor says it is and can run (Nova's ComputeNode fields),
    # read by ComputeCapabilitiesFilter and ImagePropertiesFilter. None or
    # empty: not reported.
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None  # Nova's encoding: 6.2.0 is 6002000
    # A JSON object: arch, model, vendor, topology, features, maxphysaddr.bits...
    cpu_info: dict[str, Any] | None = None
    # (architecture, hypervisor type, vm mode) triples, e.g. ("x86_64", "kvm", "hvm").
    supported_instances: tuple[SupportedInstance, ...] = ()
    # Free-form facts ("capabilities:<key>" reads them when no attribute has the name).
    stats: dict[str, str] = {}


class HostReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a host (or its operator) tells the catalog table, keyed by node name:
    the body of ``PUT /hosts/{name}`` (every field optional; ``cell_uuid`` is
    ``cell`` there and in the table) and the overlay the catalog applies.
    Every field left None keeps what Placement and the directory say."""

    service_host: str | None = None
    cell_uuid: str | None = msgspec.field(default=None, name="cell")
    enabled: bool | None = None
    up: bool | None = None
    failed_builds: int | None = None
    num_instances: int | None = None
    num_io_ops: int | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    cpu_info: dict[str, Any] | None = None
    supported_instances: tuple[SupportedInstance, ...] | None = None
    stats: dict[str, str] | None = None


class HostCatalog(Protocol):
    def records(self, uuids: Collection[str]) -> dict[str, HostRecord]:
        """Records of the hosts among ``uuids``; providers that are not hosts
        (nested children, sharing providers) are left out."""

    def host_uuids(self) -> frozenset[str]:
        """Every host (for "0 of N hosts" explanations)."""

    def size(self) -> int:
        """How many hosts there are (sizes the candidate sample; cheap)."""

    def locate(self, instance_uuids: Iterable[str]) -> dict[str, str]:
        """Instance uuid → uuid of the host it is on, for those that are placed."""

    def by_name(self, name: str) -> list[HostRecord]:
        """Records whose node name or service host is ``name`` (case-insensitive)."""


def apply_report(record: HostRecord, report: HostReport | None) -> HostRecord:
    if report is None:
        return record
    changes = {k: v for k in report.__struct_fields__ if (v := getattr(report, k)) is not None}
    return msgspec.structs.replace(record, **changes) if changes else record


class PlacementHostCatalog:
    """Hosts as Placement sees them: every root provider that is not a sharing
    provider. Reads are cached for ``refresh_s`` seconds (and refreshed early,
    at most once a second, when an unknown provider shows up in candidates)."""

    def __init__(self, client: PlacementClient, directory: Directory, *,
                 default_cell: str = DEFAULT_CELL, refresh_s: float = 60.0,
                 reports: Callable[[], Mapping[str, HostReport]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.directory = directory
        self.default_cell = default_cell
        self.refresh_s = refresh_s
        self.reports = reports
        self.clock = clock
        self._lock = threading.Lock()
        self._loaded_at = float("-inf")
        self._records: dict[str, HostRecord] = {}
        self._root_of: dict[str, str] = {}
        self._by_name: dict[str, list[HostRecord]] = {}

    def invalidate(self) -> None:
        with self._lock:
            self._loaded_at = float("-inf")

    def _fresh(self, wanted: Collection[str] = ()) -> dict[str, HostRecord]:
        now = self.clock()
        stale = now - self._loaded_at > self.refresh_s
        root_of = self._root_of
        if isinstance(wanted, (set, frozenset)):
            missing = not root_of.keys() >= wanted  # (one C-level pass for a large set)
        else:
            missing = any(u not in root_of for u in wanted)
        unknown = missing and now - self._loaded_at > 1.0
        if stale or unknown:
            with self._lock:
                if self.clock() - self._loaded_at > min(self.refresh_s, 1.0) or stale:
                    self._load()
                    self._loaded_at = self.clock()
        return self._records

    def _load(self) -> None:
        providers = self.client.list_providers()
        sharing = {p.uuid for p in self.client.list_providers(required=[SHARING_TRAIT])}
        members: dict[str, set[str]] = {}
        for agg in self.directory.known_aggregates():
            for p in self.client.list_providers(member_of=[agg]):
                members.setdefault(p.uuid, set()).add(agg)
        reports = self.reports() if self.reports else {}
        records: dict[str, HostRecord] = {}
        root_of: dict[str, str] = {}
        for p in providers:
            root_of[p.uuid] = p.root_provider_uuid or p.uuid
            if (p.root_provider_uuid or p.uuid) != p.uuid or p.uuid in sharing:
                continue
            aggs = frozenset(members.get(p.uuid, ()))
            cell = self.directory.domains_of(aggs).get(CELL_LEVEL)
            record = HostRecord(uuid=p.uuid, name=p.name, service_host=p.name,
                                cell_uuid=cell.name if cell else self.default_cell,
                                availability_zone=self.directory.zone_of(aggs) or DEFAULT_ZONE,
                                aggregates=aggs)
            records[p.uuid] = apply_report(record, reports.get(p.name))
        by_name: dict[str, list[HostRecord]] = {}
        for rec in records.values():
            by_name.setdefault(rec.name.lower(), []).append(rec)
            if rec.service_host.lower() != rec.name.lower():
                by_name.setdefault(rec.service_host.lower(), []).append(rec)
        self._records, self._root_of, self._by_name = records, root_of, by_name

    def records(self, uuids: Collection[str]) -> dict[str, HostRecord]:
        known = self._fresh(uuids)
        return {u: known[u] for u in uuids if u in known}

    def host_uuids(self) -> frozenset[str]:
        return frozenset(self._fresh())

    def size(self) -> int:
        return len(self._fresh())

    def by_name(self, name: str) -> list[HostRecord]:
        self._fresh()
        return list(self._by_name.get(name.lower(), ()))

    def locate(self, instance_uuids: Iterable[str]) -> dict[str, str]:
        self._fresh()
        found = {}
        for uuid in instance_uuids:
            held = self.client.get_allocations(uuid).allocations
            roots = {self._root_of.get(rp) for rp in held} - {None}
            hosts = [r for r in roots if r in self._records]
            if hosts:
                found[uuid] = hosts[0]
        return found


class MemoryHostCatalog:
    """Records given by code: the simulator's fleet, unit tests."""

    def __init__(self, records: Iterable[HostRecord] = ()) -> None:
        self._records: dict[str, HostRecord] = {}
        self._placed: dict[str, str] = {}
        for rec in records:
            self.put(rec)

    def put(self, record: HostRecord) -> None:
        self._records[record.uuid] = record

    def place(self, instance_uuid: str, host_uuid: str | None) -> None:
        if host_uuid is None:
            self._placed.pop(instance_uuid, None)
        else:
            self._placed[instance_uuid] = host_uuid

    def records(self, uuids: Collection[str]) -> dict[str, HostRecord]:
        known = self._records
        return {u: known[u] for u in uuids if u in known}

    def host_uuids(self) -> frozenset[str]:
        return frozenset(self._records)

    def size(self) -> int:
        return len(self._records)

    def all(self) -> list[HostRecord]:
        return list(self._records.values())

    def by_name(self, name: str) -> list[HostRecord]:
        low = name.lower()
        return [r for r in self._records.values() if r.name.lower() == low or r.service_host.lower() == low]

    def locate(self, instance_uuids: Iterable[str]) -> dict[str, str]:
        return {u: self._placed[u] for u in instance_uuids if u in self._placed}
