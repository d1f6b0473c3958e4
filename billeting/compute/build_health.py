"""A compute that keeps failing builds takes itself out of scheduling.

The compute counts its consecutive failed builds (any success resets the
count). When the count reaches ``consecutive_build_service_disable_threshold``
(0: never), the compute disables its own service record, with a reason an
operator reads in ``os-services``, and reports ``COMPUTE_STATUS_DISABLED``
on its root providers at once, so Placement's candidate query leaves it
out from the next decision on (the scheduler's service-enabled check would
only see it at the next host-report refresh).

It never overrides an operator: a service that is already disabled keeps
its state and reason. It comes back when an operator enables it
(``os-services``) or, with ``build_health_check_interval_s`` set, when the
driver's health check passes while the service is still disabled with the
reason this module wrote. Either way the count starts again from zero, so a
re-enabled host needs the threshold's number of fresh failures to be
disabled again.

Only failures that blame the host count: ``BuildFailed`` and unexpected
driver errors. An aborted build (the request is bad everywhere) or a build
interrupted by the compute stopping is no sign of a broken host.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import msgspec
from sqlalchemy import Engine

from billeting.cells import services

LOG = logging.getLogger(__name__)

REASON_PREFIX = "Disabled by the compute after "


def auto_disabled_reason(failures: int) -> str:
    return f"{REASON_PREFIX}{failures} consecutive failed builds"


def is_auto_disabled(record: services.ServiceRecord | None) -> bool:
    """Disabled by this module (not by an operator)."""
    return bool(record and record.disabled and (record.disabled_reason or "").startswith(REASON_PREFIX))


class HealthChange(msgspec.Struct, frozen=True, kw_only=True):
    """What one observation did to the service (for logs and tests)."""

    failures: int               # consecutive failed builds after it
    disabled: bool = False      # this observation disabled the service


class BuildHealth:
    """Thread-safe: builds finish on the bus server's worker threads."""

    def __init__(self, host: str, engine: Engine, threshold: int,
                 report_disabled: Callable[[bool], object]) -> None:
        self.host = host
        self.engine = engine
        self.threshold = threshold
        # Pushes COMPUTE_STATUS_DISABLED to Placement (the resource tracker's set_disabled).
        self.report_disabled = report_disabled
        self._lock = threading.Lock()
        self._failures = 0

    @property
    def failures(self) -> int:
        with self._lock:
            return self._failures

    def succeeded(self) -> HealthChange:
        with self._lock:
            self._failures = 0
        return HealthChange(failures=0)

    def failed(self) -> HealthChange:
        with self._lock:
            self._failures += 1
            failures = self._failures
        if not self.threshold or failures < self.threshold:
            return HealthChange(failures=failures)
        # At or past the threshold (past it: an earlier attempt to disable
        # failed, try again). An operator's enable resets the count first.
        try:
            record = services.get(self.engine, self.host, services.COMPUTE)
            if record is None or record.disabled:
                return HealthChange(failures=failures)
            reason = auto_disabled_reason(failures)
            services.set_disabled(self.engine, self.host, True, reason=reason)
            LOG.warning("compute %s: %s; disabling the service until an operator (or a passing health check) "
                        "enables it", self.host, reason)
            self.report_disabled(True)
        except Exception:  # noqa: BLE001 - the build is handed on already; the next failure tries again
            LOG.exception("compute %s: could not disable itself after %d failed builds", self.host, failures)
            return HealthChange(failures=failures)
        return HealthChange(failures=failures, disabled=True)

    def enabled_again(self) -> None:
        """The service went from disabled to enabled: start counting afresh."""
        with self._lock:
            self._failures = 0

    def health_check(self, healthy: Callable[[], bool]) -> bool:
        """Enable a service this module disabled once ``healthy()`` says the
        host works again; True when it did."""
        record = services.get(self.engine, self.host, services.COMPUTE)
        if not is_auto_disabled(record):
            return False
        try:
            ok = healthy()
        except Exception as exc:  # noqa: BLE001 - a failing check is an unhealthy host, not a dead task
            LOG.info("compute %s: health check failed: %s", self.host, exc)
            ok = False
        if not ok:
            return False
        services.set_disabled(self.engine, self.host, False)
        self.enabled_again()
        LOG.warning("compute %s: the health check passed; enabling the service again", self.host)
        self.report_disabled(False)
        return True
