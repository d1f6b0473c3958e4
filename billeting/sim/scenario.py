"""A simulation scenario: TOML (plus an optional CSV trace) → typed Structs.

Everything a run needs is here and nowhere else, so a scenario file and a
seed reproduce a run. Bad input raises ``ScenarioError`` naming the file
and the key (``fleet.hosts[2].vcpus: expected int``); the CLI prints it and
exits 2.

    name = "example"
    seed = 7
    candidates_limit = 1000          # Placement's limit on candidates
    [fleet]                           # layout: hosts fill racks, racks rows, rows rooms, round robin over cells
    cells = 2
    racks_per_row = 4
    rows_per_room = 2
    hosts_per_rack = 20
    [[fleet.hosts]]                   # host shapes
    name = "std"; count = 100; vcpus = 32; memory_mb = 131072; disk_gb = 2000
    [[fleet.sharing]]                 # a pool hosts of one cell share via an aggregate
    name = "ips"; cell = 1; resources = { IPV4_ADDRESS = 512 }; shared_by = "cell"
    [[flavors]]
    name = "m1.small"; vcpus = 2; memory_mb = 4096; root_gb = 20; weight = 5
    [[groups]]                        # server groups in the request mix
    name = "ha"; policy = "anti-affinity"; scope = "rack"; size = 3; flavor = "m1.small"; weight = 1
    [arrivals]
    requests = 1000; rate_per_s = 20; max_in_flight = 50
    [lifetimes]
    distribution = "exponential"; mean_s = 600
    [failures]
    build_failure_pct = 5
    bad_hosts = 10                    # hosts on which every build fails
    down = [{host = "std-00003", at_s = 60, up_at_s = 300}, {rack = "rack2", at_s = 90},
            {sharing = "nfs", at_s = 30, up_at_s = 60}]
    [timing]
    build_s = 30; build_s_by_kind = {ironic = 600}
    [[designs]]
    name = "scheduler-claims-2alt"; design = "scheduler-claims"; alternates = 2
    disable_after_failures = 3; health_check_s = 600; recent_failure_window_s = 600
"""
from __future__ import annotations

import csv
import functools
import math
import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import os_traits
from msgspec import Meta

from billeting.scheduler import sample

DESIGNS = ("legacy", "conductor-claims", "scheduler-claims")
LEVELS = ("host", "rack", "row", "room", "cell")
HOST_KINDS = ("flat", "numa", "gpu-nic", "ironic")  # HostShape.kind


# Bounds every amount is checked against when the file is read, so a bad
# value is a one-line error naming its key, not a traceback from Placement
# half-way through building the fleet. Amounts end up as Placement
# inventories and allocations, whose ceiling is 2**31 - 1.
MAX_AMOUNT = 2**31 - 1
# The fleet is built in memory and in Placement before the run: beyond this
# it would exhaust memory long before it answered (scale-5k has 5,000).
MAX_HOSTS = 200_000

Count = Annotated[int, Meta(ge=0, le=MAX_AMOUNT)]        # zero or more
Amount = Annotated[int, Meta(ge=1, le=MAX_AMOUNT)]       # one or more
Ratio = Annotated[float, Meta(gt=0)]
Seconds = Annotated[float, Meta(ge=0)]

_TRAIT = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_NAME_PART = re.compile(r"^[A-Z0-9_]+$")  # what follows CUSTOM_ in a trait or class name


class ScenarioError(Exception):
    """A scenario file that cannot be run; the message names file and key."""


class HostShape(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    count: Annotated[int, Meta(ge=1, le=MAX_HOSTS)]
    kind: Literal["flat", "numa", "gpu-nic", "ironic"] = "flat"
    vcpus: Count = 32
    memory_mb: Count = 131072
    disk_gb: Count = 2000
    cpu_allocation_ratio: Ratio = 1.0
    ram_allocation_ratio: Ratio = 1.0
    reserved_memory_mb: Count = 0
    traits: list[str] = []
    numa_nodes: Annotated[int, Meta(ge=1, le=64)] = 2  # kind = "numa": VCPU and MEMORY_MB split over this many children
    gpus: Annotated[int, Meta(ge=0, le=64)] = 0        # kind = "gpu-nic": children with VGPU inventory
    vgpus_per_gpu: Amount = 4
    nics: Annotated[int, Meta(ge=0, le=64)] = 0        # kind = "gpu-nic": SR-IOV PF children with VFs and bandwidth
    vfs_per_nic: Amount = 8
    nic_bandwidth_kbps: Amount = 10_000_000
    physnet: str = "PHYSNET0"
    node_class: str = "BAREMETAL"  # kind = "ironic": one CUSTOM_<class> unit per node
    # Share DISK_GB from the fleet's sharing providers instead of local disk.
    shared_disk: bool = False


class SharingProvider(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A provider whose inventory hosts of one cell share via an aggregate:
    a disk pool, an IP address pool, a bandwidth pool, ..."""
    name: str
    cell: int = 1                 # 1-based cell number
    disk_gb: Count | None = None  # DISK_GB shared; unset: 100,000 unless ``resources`` are given
    resources: dict[str, Amount] = {}   # other classes shared, e.g. {IPV4_ADDRESS = 512}
    # Which hosts of the cell are in its aggregate: those with shared_disk = true, or all.
    shared_by: Literal["shared-disk", "cell"] = "shared-disk"

    @property
    def effective_disk_gb(self) -> int:
        if self.disk_gb is not None:
            return self.disk_gb
        return 0 if self.resources else 100_000


class Fleet(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    hosts: list[HostShape]
    cells: int = 1
    hosts_per_rack: int = 20
    racks_per_row: int = 4
    rows_per_room: int = 4
    sharing: list[SharingProvider] = []


class FlavorSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    vcpus: Count = 0
    memory_mb: Count = 0
    root_gb: Count = 0
    ephemeral_gb: Count = 0
    weight: Annotated[float, Meta(ge=0)] = 1.0
    instances: Annotated[int, Meta(ge=1, le=1000)] = 1  # instances per request (multi-create)
    extra_specs: dict[str, str] = {}
    image_traits: list[str] = []  # image property trait:T=required


class GroupSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A server group kind: each time it is drawn, a new group of ``size`` members."""
    name: str
    policy: Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]
    flavor: str
    size: Annotated[int, Meta(ge=1, le=1000)] = 2
    scope: str = "host"
    max_server_per_host: Amount = 1
    weight: Annotated[float, Meta(ge=0)] = 1.0
    together: bool = True         # one multi-instance request; False: members one by one


class Burst(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    at_s: Seconds
    count: Count


class Arrivals(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    requests: Count = 100
    rate_per_s: Ratio = 10.0       # Poisson arrivals
    max_in_flight: Amount = 50
    bursts: list[Burst] = []
    trace: str | None = None       # CSV: arrival_s,flavor,lifetime_s,group (relative to the scenario)
    # Fill the fleet to this fraction (of every class of each host's tree,
    # every host kind; billeting/sim/prefill.py) with long-lived instances
    # written straight into Placement before the run.
    prefill: float = 0.0
    # Each host's prefill target is drawn uniformly in prefill +- this (fleets
    # are not filled evenly); the fleet's mean stays at ``prefill``.
    prefill_spread: float = 0.0


class Lifetimes(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    distribution: Literal["forever", "fixed", "exponential", "lognormal"] = "exponential"
    mean_s: Ratio = 600.0
    sigma: Annotated[float, Meta(ge=0)] = 1.0  # lognormal only


class HostDown(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Something that goes down at ``at_s`` (and comes back at ``up_at_s``):
    exactly one of a host (its name, e.g. ``std-00003``, or its index in
    build order), a rack (``rack4``: every host in it) or a sharing provider
    (its name: builds that use it fail while it is down)."""
    host: int | str | None = None
    rack: str | None = None
    sharing: str | None = None
    at_s: Seconds
    up_at_s: Seconds | None = None  # None: down for the rest of the run

    def target(self) -> tuple[str, str]:
        """(what kind of thing, which one) — the first one given."""
        for kind in ("host", "rack", "sharing"):
            value = getattr(self, kind)
            if value is not None:
                return kind, str(value)
        return "", ""


class Failures(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    build_failure_pct: Annotated[float, Meta(ge=0, le=100)] = 0.0
    bad_hosts: Count = 0           # hosts (chosen by the seed) on which every build fails
    down: list[HostDown] = []


class Timing(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Virtual durations."""
    placement_latency_ms: Seconds = 2.0   # each Placement call (slow Placement: raise it)
    rpc_latency_ms: Seconds = 5.0         # each cast between services
    scheduler_think_ms: Seconds = 5.0     # scheduler work between candidates and claim
    build_s: Seconds = 30.0               # mean build time on a compute
    build_jitter: Annotated[float, Meta(ge=0, lt=1)] = 0.3  # uniform +- this fraction
    fill_sample_s: Ratio = 10.0           # spacing of the fill-over-time points
    # Mean build time per host kind (flat, numa, gpu-nic, ironic); the kinds
    # not named take build_s. The jitter applies to each.
    build_s_by_kind: dict[str, Seconds] = {}


class DesignSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    design: Literal["legacy", "conductor-claims", "scheduler-claims"]
    alternates: Annotated[int, Meta(ge=0, le=1000)] = 2
    max_attempts: Annotated[int, Meta(ge=1, le=1000)] = 3
    host_subset_size: Amount = 1
    schedulers: Annotated[int, Meta(ge=1, le=1000)] = 1
    weigher: Literal["spread", "pack"] = "spread"
    # conductor-claims: hosts the scheduler ranks for the super conductor to claim down.
    ranked: Annotated[int, Meta(ge=1, le=MAX_AMOUNT)] = 10
    # Where the scheduler takes alternates from ("spread" or "next"; see
    # SchedulerSettings.alternates_from). Default: "next" for legacy and
    # conductor-claims (upstream's ranked list), the scheduler's own default
    # for scheduler-claims.
    alternates_from: Literal["spread", "next"] | None = None
    # How many candidates each decision asks for (SchedulerSettings.candidate_sample):
    # "adaptive", "all" (the scenario's candidates_limit at once) or a number as text.
    candidate_sample: str = "adaptive"
    multipliers: dict[str, float] = {}
    # The compute's consecutive_build_service_disable_threshold (0: off) and how
    # often a host that disabled itself is checked and enabled again once its
    # builds would succeed (0: it stays disabled). See sim/host_health.py.
    disable_after_failures: Annotated[int, Meta(ge=0, le=1000)] = 0
    health_check_s: Seconds = 0.0
    # The cell conductor's memory of hosts that just failed (0: off; cell
    # designs only): alternates on them are tried last.
    recent_failure_window_s: Seconds = 0.0
    recent_failure_hosts: Annotated[int, Meta(ge=1, le=MAX_HOSTS)] = 1024

    def effective_alternates_from(self) -> str:
        if self.alternates_from is not None:
            return self.alternates_from
        return "spread" if self.design == "scheduler-claims" else "next"

    def knobs(self) -> dict[str, str | int | float | bool]:
        """The knobs this design uses (legacy asks for no alternates, so
        neither ``alternates`` nor ``alternates_from`` means anything there)."""
        knobs: dict[str, str | int | float | bool] = {}
        if self.design != "legacy":
            knobs.update(alternates=self.alternates, alternates_from=self.effective_alternates_from())
        knobs.update(max_attempts=self.max_attempts, host_subset_size=self.host_subset_size,
                     schedulers=self.schedulers, weigher=self.weigher, candidate_sample=self.candidate_sample)
        if self.design == "conductor-claims":
            knobs["ranked"] = self.ranked
        if self.disable_after_failures:
            knobs["disable_after_failures"] = self.disable_after_failures
            if self.health_check_s:
                knobs["health_check_s"] = self.health_check_s
        if self.recent_failure_window_s and self.design != "legacy":
            knobs["recent_failure_window_s"] = self.recent_failure_window_s
        knobs.update(self.multipliers)
        return knobs


class TraceRow(msgspec.Struct, frozen=True, kw_only=True):
    arrival_s: float
    flavor: str
    lifetime_s: float | None
    group: str | None


class Scenario(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    fleet: Fleet
    flavors: list[FlavorSpec]
    designs: list[DesignSpec]
    seed: int = 1
    candidates_limit: Amount = 1000
    description: str = ""
    groups: list[GroupSpec] = []
    arrivals: Arrivals = Arrivals()
    lifetimes: Lifetimes = Lifetimes()
    failures: Failures = Failures()
    timing: Timing = Timing()
    trace: list[TraceRow] = []     # filled from arrivals.trace

    @property
    def host_count(self) -> int:
        return sum(h.count for h in self.fleet.hosts)

    def flavor(self, name: str) -> FlavorSpec:
        return next(f for f in self.flavors if f.name == name)


def _where(path: str) -> str:
    """msgspec says ``at `$.fleet.hosts[2].vcpus```; we say ``fleet.hosts[2].vcpus``."""
    return path.removeprefix("$.").removeprefix("$")


def load(path: str | Path, *, seed: int | None = None) -> Scenario:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8: a binary or mis-encoded file
        raise ScenarioError(f"{path}: not valid TOML: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    raw.setdefault("name", path.stem)
    try:
        scenario = msgspec.convert(raw, Scenario)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if " - at `" in text:
            msg, _, where = text.rpartition(" - at `")
            raise ScenarioError(f"{path}: {_where(where.rstrip('`'))}: {msg}") from None
        raise ScenarioError(f"{path}: {text}") from None
    if scenario.arrivals.trace:
        trace = load_trace(path.parent / scenario.arrivals.trace)
        scenario = msgspec.structs.replace(scenario, trace=trace)
    if seed is not None:
        scenario = msgspec.structs.replace(scenario, seed=seed)
    problems = check(scenario)
    if problems:
        raise ScenarioError(f"{path}: " + "; ".join(problems))
    return scenario


def load_trace(path: Path) -> list[TraceRow]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = _trace_rows(path, csv.DictReader(fh))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: trace file not found") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the trace: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not a CSV trace: not UTF-8 text (byte {exc.start})") from None
    except csv.Error as exc:  # e.g. an unterminated quote
        raise ScenarioError(f"{path}: not a CSV trace: {exc}") from None
    rows.sort(key=lambda r: r.arrival_s)
    return rows


def _trace_rows(path: Path, reader: csv.DictReader) -> list[TraceRow]:
    missing = {"arrival_s", "flavor"} - set(reader.fieldnames or ())
    if missing:
        raise ScenarioError(f"{path}: header lacks column(s) {', '.join(sorted(missing))}")
    rows: list[TraceRow] = []
    for row in reader:
        line = reader.line_num
        # DictReader fills the columns a short row lacks with None.
        if row["arrival_s"] is None or row["flavor"] is None:
            raise ScenarioError(f"{path}:{line}: expected at least arrival_s and flavor")
        try:
            lifetime = row.get("lifetime_s") or ""
            rows.append(TraceRow(arrival_s=float(row["arrival_s"]), flavor=row["flavor"].strip(),
                                 lifetime_s=float(lifetime) if lifetime.strip() else None,
                                 group=(row.get("group") or "").strip() or None))
        except ValueError as exc:
            raise ScenarioError(f"{path}:{line}: {exc}") from None
    return rows


def check(s: Scenario) -> list[str]:
    """Cross-field checks msgspec cannot do; each problem names its key."""
    out: list[str] = []
    if not s.fleet.hosts:
        out.append("fleet.hosts: at least one host shape")
    for i, h in enumerate(s.fleet.hosts):
        if h.count < 1:
            out.append(f"fleet.hosts[{i}].count: must be at least 1")
        if h.kind != "ironic" and min(h.vcpus, h.memory_mb) < 1:
            out.append(f"fleet.hosts[{i}]: vcpus and memory_mb must be positive")
        if h.shared_disk and not any(sp.cell <= s.fleet.cells and sp.effective_disk_gb for sp in s.fleet.sharing):
            out.append(f"fleet.hosts[{i}].shared_disk: the fleet has no sharing provider of disk")
    if s.host_count > MAX_HOSTS:
        out.append(f"fleet.hosts: {s.host_count:,} hosts in all, more than the simulator builds ({MAX_HOSTS:,})")
    for i, h in enumerate(s.fleet.hosts):
        out += _shape_problems(f"fleet.hosts[{i}]", h)
    for i, sp in enumerate(s.fleet.sharing):
        if not 1 <= sp.cell <= s.fleet.cells:
            out.append(f"fleet.sharing[{i}].cell: must be between 1 and fleet.cells ({s.fleet.cells})")
        out += _sharing_problems(f"fleet.sharing[{i}]", sp, s)
    pool_names = [sp.name for sp in s.fleet.sharing]
    if len(set(pool_names)) != len(pool_names):
        out.append("fleet.sharing: names must be distinct")
    for key in ("cells", "hosts_per_rack", "racks_per_row", "rows_per_room"):
        if getattr(s.fleet, key) < 1:
            out.append(f"fleet.{key}: must be at least 1")
    if not s.flavors:
        out.append("flavors: at least one flavor")
    names = [f.name for f in s.flavors]
    if len(set(names)) != len(names):
        out.append("flavors: flavor names must be distinct")
    for i, f in enumerate(s.flavors):
        if f.weight < 0 or f.instances < 1:
            out.append(f"flavors[{i}]: weight must be >= 0 and instances >= 1")
        out += _flavor_problems(f"flavors[{i}]", f)
    for i, g in enumerate(s.groups):
        if g.flavor not in names:
            out.append(f"groups[{i}].flavor: no flavor named {g.flavor!r}")
        if g.scope not in LEVELS:
            out.append(f"groups[{i}].scope: one of {', '.join(LEVELS)}")
        if g.size < 1:
            out.append(f"groups[{i}].size: must be at least 1")
    group_names = {g.name for g in s.groups}
    for i, row in enumerate(s.trace):
        if row.flavor not in names:
            out.append(f"arrivals.trace row {i + 2}: no flavor named {row.flavor!r}")
        if row.group and row.group.split("#", 1)[0] not in group_names:
            out.append(f"arrivals.trace row {i + 2}: no group named {row.group.split('#', 1)[0]!r}")
    out += _finite("arrivals", s.arrivals) + _finite("lifetimes", s.lifetimes) + _finite("failures", s.failures)
    out += _finite("timing", s.timing)
    for i, b in enumerate(s.arrivals.bursts):
        out += _finite(f"arrivals.bursts[{i}]", b)
    for i, g in enumerate(s.groups):
        out += _finite(f"groups[{i}]", g)
    for i, d in enumerate(s.failures.down):
        out += _finite(f"failures.down[{i}]", d)
    for i, d in enumerate(s.designs):
        try:
            sample.check(d.candidate_sample)
        except ValueError as exc:
            out.append(f"designs[{i}].{exc}")
        out += [f"designs[{i}].multipliers.{k}: must be a finite number" for k, v in d.multipliers.items()
                if not math.isfinite(v)]
    for i, row in enumerate(s.trace):
        if not math.isfinite(row.arrival_s) or row.arrival_s < 0 or (
                row.lifetime_s is not None and not (math.isfinite(row.lifetime_s) and row.lifetime_s >= 0)):
            out.append(f"arrivals.trace row {i + 2}: arrival_s and lifetime_s must be finite and >= 0")
    a = s.arrivals
    if a.requests < 0 or a.rate_per_s <= 0 or a.max_in_flight < 1:
        out.append("arrivals: requests >= 0, rate_per_s > 0 and max_in_flight >= 1")
    if not 0 <= a.prefill < 1:
        out.append("arrivals.prefill: a fraction in [0, 1)")
    if not 0 <= a.prefill_spread <= min(a.prefill, 1 - a.prefill):
        out.append("arrivals.prefill_spread: between 0 and min(prefill, 1 - prefill)")
    if not 0 <= s.failures.build_failure_pct <= 100:
        out.append("failures.build_failure_pct: a percentage in [0, 100]")
    if s.failures.bad_hosts > s.host_count:
        out.append("failures.bad_hosts: more than the fleet's hosts")
    out += _outage_problems(s)
    out += _build_time_problems(s)
    if s.candidates_limit < 1:
        out.append("candidates_limit: must be at least 1")
    if not s.designs:
        out.append("designs: at least one design")
    dnames = [d.name for d in s.designs]
    if len(set(dnames)) != len(dnames):
        out.append("designs: design names must be distinct")
    for i, d in enumerate(s.designs):
        if d.alternates < 0 or d.max_attempts < 1 or d.host_subset_size < 1 or d.schedulers < 1 or d.ranked < 1:
            out.append(f"designs[{i}]: alternates >= 0, max_attempts, host_subset_size, schedulers, ranked >= 1")
        if d.health_check_s and not d.disable_after_failures:
            out.append(f"designs[{i}].health_check_s: only means something with disable_after_failures")
        if d.recent_failure_window_s and d.design == "legacy":
            out.append(f"designs[{i}].recent_failure_window_s: legacy walks no alternates (it asks the scheduler "
                       "again); use it with conductor-claims or scheduler-claims")
    return out


def host_names(s: Scenario) -> list[str]:
    """Every host's name, as ``fleet.layout`` names them (without a prefix)."""
    counts: dict[str, int] = {}
    for h in s.fleet.hosts:
        counts[h.name] = counts.get(h.name, 0) + h.count
    return [f"{name}-{k:05d}" for name, n in counts.items() for k in range(n)]


def rack_names(s: Scenario) -> list[str]:
    return [f"rack{r}" for r in range(-(-s.host_count // max(s.fleet.hosts_per_rack, 1)))]


def _outage_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    hosts = set(host_names(s)) if s.host_count <= MAX_HOSTS else set()
    racks = set(rack_names(s)) if s.host_count <= MAX_HOSTS else set()
    sharing = {sp.name for sp in s.fleet.sharing}
    windows: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for i, d in enumerate(s.failures.down):
        where = f"failures.down[{i}]"
        given = [k for k in ("host", "rack", "sharing") if getattr(d, k) is not None]
        if len(given) != 1:
            out.append(f"{where}: name exactly one of host, rack or sharing (got {', '.join(given) or 'none'})")
            continue
        kind, name = d.target()
        if isinstance(d.host, int) and not isinstance(d.host, bool):
            if not 0 <= d.host < s.host_count:
                out.append(f"{where}.host: an index below {s.host_count} (or a host name such as "
                           f"{host_names(s)[0]!r})")
                continue
            name = str(d.host)
        elif kind == "host" and hosts and name not in hosts:
            out.append(f"{where}.host: no host named {name!r} (names are <shape>-NNNNN, e.g. {min(hosts)!r})")
            continue
        elif kind == "rack" and racks and name not in racks:
            out.append(f"{where}.rack: no rack named {name!r} (the fleet has rack0 to rack{len(racks) - 1})")
            continue
        elif kind == "sharing" and name not in sharing:
            out.append(f"{where}.sharing: no sharing provider named {name!r}"
                       + (f" (the fleet has {', '.join(sorted(sharing))})" if sharing else " (the fleet has none)"))
            continue
        if d.up_at_s is not None and not d.up_at_s > d.at_s:
            out.append(f"{where}.up_at_s: must be later than at_s ({d.at_s:g})")
            continue
        end = d.up_at_s if d.up_at_s is not None else math.inf
        for start, stop, j in windows.get((kind, name), []):
            if d.at_s < stop and start < end:
                out.append(f"{where}: {kind} {name!r} is already down then (failures.down[{j}]); "
                           "give each outage of one target its own, separate time")
        windows.setdefault((kind, name), []).append((d.at_s, end, i))
    return out


def _build_time_problems(s: Scenario) -> list[str]:
    kinds = {h.kind for h in s.fleet.hosts}
    known = HOST_KINDS
    out = []
    for kind, seconds in s.timing.build_s_by_kind.items():
        where = f"timing.build_s_by_kind.{kind}"
        if kind not in known:
            out.append(f"{where}: not a host kind (one of {', '.join(known)})")
        elif kind not in kinds:
            out.append(f"{where}: no host of the fleet is of kind {kind!r}")
        elif not math.isfinite(seconds):
            out.append(f"{where}: must be a finite number")
    return out


def _finite(where: str, struct) -> list[str]:
    """TOML has ``inf`` and ``nan``; no duration, rate or ratio here may be either."""
    return [f"{where}.{name}: must be a finite number" for name in struct.__struct_fields__
            if isinstance(value := getattr(struct, name), float) and not math.isfinite(value)]


def _trait_problem(where: str, name: str) -> str | None:
    if _TRAIT.match(name) or name in _standard_traits():
        return None
    return f"{where}: {name!r} is neither a standard trait nor CUSTOM_ followed by A-Z, 0-9 or _"


@functools.cache
def _standard_traits() -> frozenset[str]:
    return frozenset(os_traits.get_traits())


def _shape_problems(where: str, h: HostShape) -> list[str]:
    out = _finite(where, h)
    out += [p for t in h.traits if (p := _trait_problem(f"{where}.traits", t))]
    if h.kind == "ironic":
        if not _NAME_PART.match(h.node_class):
            out.append(f"{where}.node_class: A-Z, 0-9 and _ only (it becomes CUSTOM_{h.node_class})")
        return out
    if not h.shared_disk and h.disk_gb < 1:
        out.append(f"{where}.disk_gb: must be at least 1 (or shared_disk = true)")
    if h.reserved_memory_mb > h.memory_mb:
        out.append(f"{where}.reserved_memory_mb: more than memory_mb")
    if h.kind == "numa" and min(h.vcpus, h.memory_mb) < h.numa_nodes:
        out.append(f"{where}: vcpus and memory_mb must be at least numa_nodes ({h.numa_nodes})")
    if h.kind == "gpu-nic" and h.nics and not _NAME_PART.match(h.physnet):
        out.append(f"{where}.physnet: A-Z, 0-9 and _ only (it becomes the trait CUSTOM_{h.physnet})")
    return out


def _class_problem(where: str, name: str) -> str | None:
    if _TRAIT.match(name) or name in _standard_classes():
        return None
    return f"{where}: {name!r} is neither a standard resource class nor CUSTOM_ followed by A-Z, 0-9 or _"


@functools.cache
def _standard_classes() -> frozenset[str]:
    import os_resource_classes

    return frozenset(os_resource_classes.STANDARDS)


def _sharing_problems(where: str, sp: SharingProvider, s: Scenario) -> list[str]:
    out = [p for rc in sp.resources if (p := _class_problem(f"{where}.resources", rc))]
    if "DISK_GB" in sp.resources:
        out.append(f"{where}.resources: DISK_GB: give a shared disk as {where}.disk_gb")
    if not sp.effective_disk_gb and not sp.resources:
        out.append(f"{where}: shares nothing (disk_gb = 0 and no resources)")
    if sp.shared_by == "shared-disk" and not any(h.shared_disk for h in s.fleet.hosts):
        out.append(f"{where}.shared_by: \"shared-disk\", but no host shape has shared_disk = true "
                   "(share it with every host of its cell: shared_by = \"cell\")")
    return out


def _flavor_problems(where: str, f: FlavorSpec) -> list[str]:
    from billeting.scheduler import nova_features
    from billeting.scheduler.nova import Flavor, Image, resource_groups

    out = _finite(where, f)
    out += [p for t in f.image_traits if (p := _trait_problem(f"{where}.image_traits", t))]
    for key, value in f.extra_specs.items():
        if key.startswith("trait") and ":" in key and value in ("required", "forbidden"):
            if problem := _trait_problem(f"{where}.extra_specs", key.split(":", 1)[1]):
                out.append(problem)
    image = Image(properties={f"trait:{t}": "required" for t in f.image_traits}) if f.image_traits else None
    if keys := nova_features.unmodelled(f.extra_specs):
        out.append(f"{where}.extra_specs: {', '.join(keys)}: {nova_features.UNMODELLED_WHY}")
    groups, _policy = resource_groups(Flavor(vcpus=f.vcpus, memory_mb=f.memory_mb, root_gb=f.root_gb,
                                             ephemeral_gb=f.ephemeral_gb, name=f.name,
                                             extra_specs=f.extra_specs), image)
    if not any(g.resources for g in groups):
        out.append(f"{where}: asks for no resources (vcpus, memory_mb, root_gb and extra specs all zero)")
    return out


def select_designs(s: Scenario, wanted: list[str]) -> Scenario:
    """Keep the designs named (by name or by design kind), in the order given."""
    chosen = []
    for w in wanted:
        found = [d for d in s.designs if d.name == w] or [d for d in s.designs if d.design == w]
        if not found:
            if w in DESIGNS:
                found = [DesignSpec(name=w, design=w)]  # type: ignore[arg-type]
            else:
                raise ScenarioError(f"--designs: {w!r} is neither a design of the scenario "
                                    f"({', '.join(d.name for d in s.designs)}) nor one of {', '.join(DESIGNS)}")
        chosen.extend(d for d in found if d not in chosen)
    return msgspec.structs.replace(s, designs=chosen)
