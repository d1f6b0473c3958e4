"""What the control plane does about hosts that keep failing, in a run.

Two mechanisms of the real services, switched on per design:

* ``disable_after_failures`` (the compute's
  ``consecutive_build_service_disable_threshold``): the failure that makes
  this many in a row on a host disables it — ``COMPUTE_STATUS_DISABLED`` on
  its root provider in the real Placement, so the scheduler's query leaves it
  out from the next decision, and its host record disabled. With
  ``health_check_s`` it is checked that long after, and again every as long:
  a host whose builds would not fail any more (not an always-failing host,
  not down) passes and is enabled again with a fresh count. Without it a
  disabled host stays disabled for the rest of the run (no operator here).
* ``recent_failure_window_s`` (the cell conductor's memory,
  ``billeting.conductor.recent_failures``, the very class): per cell, hosts
  that failed a build within the window are tried last when walking a
  build's alternates. Only the cell designs walk alternates.

The Placement calls a compute makes to disable itself are not a build's
cost: they go through the run's uncounted client.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from billeting.scheduler.prefilters import DISABLED_TRAIT as DISABLED
from billeting.conductor.recent_failures import RecentFailures
from billeting.placement_client.model import WriteResult

if TYPE_CHECKING:
    from billeting.sim.engine import Run

TRAIT_ATTEMPTS = 5  # generation races with claims on the same provider


class HostHealth:
    def __init__(self, run: Run) -> None:
        self.run = run
        d = run.d
        self.threshold = d.disable_after_failures
        self.health_check_s = d.health_check_s
        self.in_a_row: dict[str, int] = {}
        self.disabled: set[str] = set()
        self.disables = 0            # times a host disabled itself
        self.enables = 0             # times a health check enabled one again
        self._memories: dict[str, RecentFailures] = {}
        self._window_s = d.recent_failure_window_s if d.design != "legacy" else 0.0
        self._max_hosts = d.recent_failure_hosts

    # --- the compute's count ---------------------------------------------------------

    def build_finished(self, host_uuid: str, ok: bool) -> None:
        if ok:
            self.in_a_row[host_uuid] = 0
            return
        n = self.in_a_row[host_uuid] = self.in_a_row.get(host_uuid, 0) + 1
        if self.threshold and n == self.threshold and host_uuid not in self.disabled:
            self._set_disabled(host_uuid, True)
            self.disables += 1
            if self.health_check_s > 0:
                self.run.clock.call_later(self.health_check_s, lambda: self.run.clock.spawn(self._check, host_uuid))

    def _check(self, host_uuid: str) -> None:
        if host_uuid not in self.disabled:
            return
        if not self.run.would_fail(host_uuid):
            self._set_disabled(host_uuid, False)
            self.in_a_row[host_uuid] = 0
            self.enables += 1
            return
        self.run.clock.call_later(self.health_check_s, lambda: self.run.clock.spawn(self._check, host_uuid))

    def _set_disabled(self, host_uuid: str, disabled: bool) -> None:
        (self.disabled.add if disabled else self.disabled.discard)(host_uuid)
        client = self.run.uncounted
        for _ in range(TRAIT_ATTEMPTS):
            have = client.get_traits(host_uuid)
            traits = set(have.traits) | {DISABLED} if disabled else set(have.traits) - {DISABLED}
            outcome = client.put_traits(host_uuid, traits, have.resource_provider_generation)
            if outcome.result is not WriteResult.PROVIDER_CONFLICT:
                break
        catalog = self.run.catalog
        rec = catalog.records([host_uuid]).get(host_uuid)
        if rec is not None:
            catalog.put(msgspec.structs.replace(rec, enabled=not disabled))

    # --- the cell conductor's memory ---------------------------------------------------

    def _memory(self, cell: str) -> RecentFailures:
        memory = self._memories.get(cell)
        if memory is None:
            memory = self._memories[cell] = RecentFailures(self._window_s, self._max_hosts,
                                                           clock=lambda: self.run.clock.now)
        return memory

    def saw_failure(self, cell: str, service_host: str) -> None:
        if self._window_s > 0:
            self._memory(cell).failed(service_host)

    def avoid(self, cell: str) -> frozenset[str]:
        return self._memory(cell).hosts() if self._window_s > 0 else frozenset()
