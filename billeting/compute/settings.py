"""A compute's configuration: one frozen object, built by the command line
(or by whoever starts computes in a process) and passed down.

Names and defaults follow Nova's options of the same meaning
(docs/design/compute-reporting.md#inventory-records).
"""
from __future__ import annotations

from dataclasses import dataclass

from billeting.cells.services import DEFAULT_DOWN_TIME_S
from billeting.compute.driver import Reserved
from billeting.compute.traits import DEFAULT_OWNER


@dataclass(frozen=True)
class ComputeSettings:
    # [DEFAULT]reserved_host_*
    reserved_host_cpus: int = 0
    reserved_host_memory_mb: int = 512
    reserved_host_disk_mb: int = 0
    # [DEFAULT]*_allocation_ratio: when set, they override even a value an
    # operator put into Placement; when None, Placement's value is kept, and a
    # new inventory gets the initial_* ratio.
    cpu_allocation_ratio: float | None = None
    ram_allocation_ratio: float | None = None
    disk_allocation_ratio: float | None = None
    initial_cpu_allocation_ratio: float = 4.0
    initial_ram_allocation_ratio: float = 1.0
    initial_disk_allocation_ratio: float = 1.0
    owner_trait: str = DEFAULT_OWNER
    # Periodic work, in seconds.
    report_interval_s: float = 10.0            # heartbeat
    update_resources_interval_s: float = 60.0  # resource tracker run
    association_refresh_s: float = 300.0       # re-read the provider tree from Placement
    audit_interval_s: float = 300.0            # orphaned allocation audit (<= 0: off)
    # An allocation on this compute's providers whose consumer no cell record
    # explains is removed only after it stayed unexplained this long (a build
    # the API level claimed but has not recorded yet must not be touched).
    orphan_grace_s: float = 600.0
    service_down_time_s: float = DEFAULT_DOWN_TIME_S
    build_threads: int = 8
    # [compute]consecutive_build_service_disable_threshold: this many failed
    # builds in a row disable the service (0: never; see build_health).
    consecutive_build_service_disable_threshold: int = 10
    # How often a service the compute disabled itself runs the driver's health
    # check, and enables itself again when it passes (<= 0: only an operator enables it).
    build_health_check_interval_s: float = 0.0

    @property
    def reserved(self) -> Reserved:
        return Reserved(cpus=self.reserved_host_cpus, memory_mb=self.reserved_host_memory_mb,
                        disk_mb=self.reserved_host_disk_mb)

    def check(self) -> None:
        for name in ("reserved_host_cpus", "reserved_host_memory_mb", "reserved_host_disk_mb"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
                     "initial_cpu_allocation_ratio", "initial_ram_allocation_ratio",
                     "initial_disk_allocation_ratio"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive")
        if self.report_interval_s <= 0 or self.update_resources_interval_s <= 0:
            raise ValueError("report and update intervals must be positive")
        if self.build_threads < 1:
            raise ValueError("build_threads must be at least 1")
        if self.consecutive_build_service_disable_threshold < 0:
            raise ValueError("consecutive_build_service_disable_threshold must not be negative (0 turns it off)")
        if not self.owner_trait:
            raise ValueError("owner_trait must not be empty")
