"""Running computes in a process: one or many service hosts of one cell,
sharing the cell's wiring, with their periodic tasks on one thread.

    service = ComputeService(wiring, [ComputeManager("h1", FakeDriver("h1"), wiring, settings), ...])
    service.start()   # registers, reports, recovers, serves
    ...
    service.stop()
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from billeting.cells.periodic import Periodic
from billeting.cells.wiring import CellWiring
from billeting.compute.manager import ComputeManager, Recovery

LOG = logging.getLogger(__name__)


class ComputeService:
    def __init__(self, wiring: CellWiring, managers: Sequence[ComputeManager], *, periodic: bool = True) -> None:
        if not managers:
            raise ValueError("a compute service needs at least one host")
        hosts = [m.host for m in managers]
        if len(set(hosts)) != len(hosts):
            raise ValueError("each compute host may run once per process")
        for m in managers:
            if m.wiring is not wiring:
                raise ValueError(f"compute {m.host} was wired to another cell")
        self.wiring = wiring
        self.managers = list(managers)
        self.periodic = Periodic(f"compute-{wiring.name}") if periodic else None
        self.recoveries: dict[str, Recovery] = {}

    def start(self) -> None:
        for m in self.managers:
            self.recoveries[m.host] = m.start()
        if self.periodic is not None:
            for m in self.managers:
                s = m.settings
                self.periodic.add(f"{m.host}.heartbeat", s.report_interval_s, m.heartbeat)
                self.periodic.add(f"{m.host}.update_available_resource", s.update_resources_interval_s,
                                  m.update_available_resource)
                self.periodic.add(f"{m.host}.audit_allocations", s.audit_interval_s, m.audit_allocations)
                self.periodic.add(f"{m.host}.health_check", s.build_health_check_interval_s, m.health_check)
            self.periodic.start()

    def request_stop(self) -> None:
        """Ask every host and the periodic thread to stop, waiting for none:
        each waits up to a bus drain or a task, which would add up host by host."""
        if self.periodic is not None:
            self.periodic.request_stop()
        for m in self.managers:
            m.request_stop()

    def stop(self) -> None:
        self.request_stop()
        if self.periodic is not None:
            self.periodic.stop()
        for m in self.managers:
            m.stop()

    def manager(self, host: str) -> ComputeManager:
        for m in self.managers:
            if m.host == host:
                return m
        raise KeyError(host)
