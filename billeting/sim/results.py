"""What a simulation run produces: the typed record that the terminal table,
the JSON file, the HTML report and ``--compare`` all read.

Every figure is per design, so designs compare field by field. Real
(wall-clock) times are in milliseconds, virtual times in seconds; the
field names say which. Optional fields are ``None`` when a run did not
compute them (e.g. packing bounds skipped for a huge fleet), never 0.
"""
from __future__ import annotations

import msgspec


class Distribution(msgspec.Struct, frozen=True, kw_only=True):
    """Summary of a sample, plus a bounded sample of the raw values for plots."""
    count: int
    p50: float
    p90: float
    p99: float
    mean: float
    max: float
    # At most a few thousand values, chosen evenly: enough for a histogram.
    sample: list[float] = []


class FillPoint(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """The fleet at one virtual instant."""
    t_s: float
    active: int            # instances ACTIVE (or building) at t
    hosts_in_use: int      # hosts holding at least one allocation
    vcpu_fill: float       # used / allocatable over the fleet, 0..1
    memory_fill: float


class ProviderCapacity(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One provider of a host's tree: what it alone can hold, and its traits."""
    name: str
    capacity: dict[str, int]
    traits: list[str] = []


class HostCapacity(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a host can hold: (total - reserved) * allocation_ratio per class,
    summed over its provider tree; ``providers`` keeps the tree itself (root
    first) and ``domains`` its rack, row and room, so the packing bounds obey
    the same rules as the checker. Both empty in results from before."""
    host: str
    cell: str
    capacity: dict[str, int]
    providers: list[ProviderCapacity] = []
    domains: dict[str, str] = {}


class Placement(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One instance alive at the end of the run and what it holds."""
    instance: str
    host: str
    resources: dict[str, int]
    # Amounts each taken from one provider (a class of the unnumbered request
    # group, or a whole numbered group); empty: one per class of ``resources``.
    pieces: list[dict[str, int]] = []
    allocations: dict[str, dict[str, int]] = {}   # provider name -> amounts, as placed
    required: list[str] = []
    forbidden: list[str] = []
    group: str | None = None


class GroupRule(msgspec.Struct, frozen=True, kw_only=True):
    """A server group's rule, as the checker enforces it."""
    policy: str            # affinity | anti-affinity | soft-affinity | soft-anti-affinity
    scope: str = "host"    # host | rack | row | room | cell
    max_server_per_host: int = 1


class PackingBound(msgspec.Struct, frozen=True, kw_only=True):
    """How many hosts the final workload needs, bracketed.

    ``lp_bound`` is a lower bound (no legal packing uses fewer hosts) and
    ``compaction`` an upper bound (a legal packing with that many hosts was
    found); both obey capacity per provider, traits and server groups.
    ``lower_method`` and ``upper_method`` say how each was obtained (an
    exact integer program, its LP relaxation, a heuristic, the run's own
    placement); when ``exact`` both are the optimum."""
    hosts_in_use: int
    lp_bound: int | None
    compaction: int | None
    solver: str            # the whole story, e.g. "highs 1.16 integer program: optimal"
    lower_method: str = ""
    upper_method: str = ""
    exact: bool = False


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """A constraint the independent checker found broken."""
    kind: str              # capacity | trait | affinity | anti-affinity | ...
    level: str | None = None   # host, rack, row, room, cell for affinity kinds
    instance: str | None = None
    host: str | None = None
    detail: str


class DesignResult(msgspec.Struct, frozen=True, kw_only=True):
    name: str              # as named in the scenario, e.g. "scheduler-claims-2alt"
    design: str            # legacy | conductor-claims | scheduler-claims
    knobs: dict[str, str | int | float | bool] = {}

    requested: int         # instances asked for
    succeeded: int         # instances that became ACTIVE
    errored: int           # instances that ended in ERROR
    error_reasons: dict[str, int] = {}   # fault text (shortened) -> count
    # Build attempts made on hosts, per instance that reached at least one
    # host (an instance refused before any host was tried is not a build
    # that took 0 attempts: it is counted in ``never_built``).
    attempts_per_build: Distribution
    # Attempts beyond each instance's first, summed over every instance,
    # those that finally failed included. None: a result from before it was
    # counted.
    retries: int | None = None
    never_built: int | None = None       # instances that ended without any host tried
    upcalls: int           # calls from a cell back to the scheduler
    claim_conflicts: int   # claims Placement refused (409)
    placement_requests: int
    placement_requests_per_build: float

    scheduler_latency_ms: Distribution   # real time of the real scheduler code
    time_to_active_s: Distribution       # virtual time from request to ACTIVE

    violations: list[Violation] = []
    fill: list[FillPoint] = []
    packing: PackingBound | None = None
    stranded: dict[str, float] = {}      # class -> fraction of capacity stranded
    anti_affinity_spread: dict[str, float] = {}   # level -> mean distinct domains per group / group size
    wall_s: float = 0.0

    # The end state, kept so packing and checks can be recomputed offline.
    hosts: list[HostCapacity] = []
    placements: list[Placement] = []
    groups: dict[str, GroupRule] = {}    # server group uuid -> its rule

    @property
    def success_rate(self) -> float:
        return self.succeeded / self.requested if self.requested else 1.0


class RunResult(msgspec.Struct, frozen=True, kw_only=True):
    scenario: str
    seed: int
    hosts: int
    cells: int
    requests: int
    designs: list[DesignResult]
    billeting_version: str
    started_at: str        # ISO 8601, UTC
    notes: list[str] = []  # e.g. why packing bounds were skipped


def dump(run: RunResult) -> bytes:
    return msgspec.json.format(msgspec.json.encode(run), indent=1)


def load(data: bytes) -> RunResult:
    return msgspec.json.decode(data, type=RunResult)
