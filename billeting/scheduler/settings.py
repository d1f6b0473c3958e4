"""The scheduler's configuration, one frozen object passed down.

Option names follow Nova's where Nova has the same option (so operators can
read them across), grouped as ``[scheduler]`` and ``[filter_scheduler]`` in
a config file. There is deliberately no ``max_attempts``: how many alternates
to return is the caller's choice, per request.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from billeting.scheduler import sample
from billeting.scheduler.directory import DEFAULT_LEVELS

DEFAULT_MULTIPLIERS = {
    "ram_weight_multiplier": 1.0,
    "cpu_weight_multiplier": 1.0,
    "disk_weight_multiplier": 1.0,
    "io_ops_weight_multiplier": -1.0,
    "build_failure_weight_multiplier": 1_000_000.0,
    "soft_affinity_weight_multiplier": 1.0,
    "soft_anti_affinity_weight_multiplier": 1.0,
    "num_instances_weight_multiplier": 0.0,
}


ALTERNATES_FROM = ("spread", "next")


@dataclass(frozen=True)
class SchedulerSettings:
    # [scheduler]
    max_placement_results: int = 1000
    default_cell: str = "cell1"
    default_availability_zone: str = "nova"
    topology_levels: tuple[str, ...] = DEFAULT_LEVELS
    # Seconds the default host catalog keeps what it read from Placement.
    catalog_refresh_s: float = 60.0
    # Tenant isolation (request filter): projects with aggregates of their own
    # go only there; with the second option, projects without any fail.
    limit_tenants_to_placement_aggregate: bool = False
    placement_aggregate_required_for_tenants: bool = False
    # Isolated aggregates (request filter): an aggregate whose metadata says
    # ``trait:T=required`` keeps out every request that does not require T.
    enable_isolated_aggregate_filtering: bool = False
    # Image metadata prefilter (request filter): the image's bus, video, NIC
    # model and architecture properties become traits the compute node must have.
    image_metadata_prefilter: bool = False
    # Image type support (request filter): unless it boots from a volume, a
    # request needs a host whose driver can boot the image's disk format.
    query_placement_for_image_type_support: bool = False
    # Concurrent single-instance requests of one process that would send
    # Placement the same query are decided as one batch: one candidates
    # query and one claim transaction for all (see ``coalesce``). A request
    # that finds none like it in progress is decided at once.
    coalesce_requests: bool = True
    # [filter_scheduler]
    enabled_filters: tuple[str, ...] | None = None   # None: every built-in filter
    weighers: tuple[str, ...] | None = None          # None: every built-in weigher
    multipliers: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MULTIPLIERS))
    host_subset_size: int = 1
    shuffle_best_same_weighed_hosts: bool = False
    # Where alternates come from in the chosen host's cell: "spread" takes
    # them evenly across the ranked hosts that fit, "next" takes the ones
    # ranked right after the chosen (Nova's way). An alternate is claimed a
    # whole build later, by when the requests in flight have taken the top
    # of the very same ranking; `billeting simulate scenarios/seeds.toml`
    # measured 99.3% of builds succeeding with "next" and 100% with
    # "spread" (seed 2017, 2026-11-23).
    alternates_from: str = "spread"
    # How many candidates a decision asks Placement for (``sample``):
    # "adaptive" starts small and grows only when filters leave too few;
    # "all" asks for max_placement_results at once; an integer N starts at N.
    candidate_sample: str = sample.ADAPTIVE
    # NumInstancesFilter, IoOpsFilter (off by default) and their aggregate forms.
    max_instances_per_host: int = 50
    max_io_ops_per_host: int = 8
    # ImagePropertiesFilter: the architecture of an image that names none
    # (``hw_architecture``); None: such an image runs on any architecture.
    image_properties_default_architecture: str | None = None

    def multiplier(self, option: str) -> float:
        return self.multipliers.get(option, DEFAULT_MULTIPLIERS.get(option, 1.0))

    def with_multipliers(self, **changes: float) -> "SchedulerSettings":
        merged = dict(self.multipliers)
        merged.update(changes)
        return replace(self, multipliers=merged)

    def check(self) -> None:
        if self.max_placement_results < 1:
            raise ValueError("max_placement_results must be at least 1")
        if self.max_instances_per_host < 0 or self.max_io_ops_per_host < 0:
            raise ValueError("max_instances_per_host and max_io_ops_per_host must not be negative")
        if self.host_subset_size < 1:
            raise ValueError("host_subset_size must be at least 1")
        if self.alternates_from not in ALTERNATES_FROM:
            raise ValueError(f"alternates_from must be one of {', '.join(ALTERNATES_FROM)}")
        sample.check(self.candidate_sample)
        if not self.topology_levels or len(set(self.topology_levels)) != len(self.topology_levels):
            raise ValueError("topology_levels must name at least one level, each once")
        for level in self.topology_levels:
            if level in ("host", "cell") or not level.isidentifier():
                raise ValueError(f"invalid topology level name {level!r}")


SETTING_NAMES = frozenset(f.name for f in fields(SchedulerSettings))
