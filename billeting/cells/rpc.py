"""Typed senders for the casts of a cell's bus (see ``messages``).

Whoever holds a cell's bus can cast with these: the API level into the
cell, a compute to its cell conductor, the cell conductor to a compute.
They only ever reach the bus they were given.
"""
from __future__ import annotations

from billeting.cells.messages import (
    COMPUTE_TOPIC,
    CONDUCTOR_TOPIC,
    BuildInstance,
    DeleteInstance,
    RefreshService,
    RescheduleBuild,
    TerminateInstance,
    encode,
)
from billeting.messaging import Bus


class ComputeAPI:
    """Casts to the computes of one cell, addressed by service host."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    def build_and_run_instance(self, host: str, build: BuildInstance) -> None:
        self.bus.cast(COMPUTE_TOPIC, "build_and_run_instance", encode(build), server=host)

    def terminate_instance(self, host: str, instance_uuid: str) -> None:
        self.bus.cast(COMPUTE_TOPIC, "terminate_instance", encode(TerminateInstance(instance_uuid)), server=host)

    def refresh_service(self, host: str) -> None:
        self.bus.cast(COMPUTE_TOPIC, "refresh_service", encode(RefreshService(host)), server=host)


class CellConductorAPI:
    """Casts to the cell conductor(s) of one cell (they share one queue)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    def build_instances(self, reschedule: RescheduleBuild) -> None:
        self.bus.cast(CONDUCTOR_TOPIC, "build_instances", encode(reschedule))

    def delete_instance(self, instance_uuid: str) -> None:
        self.bus.cast(CONDUCTOR_TOPIC, "delete_instance", encode(DeleteInstance(instance_uuid)))
