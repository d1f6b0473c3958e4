"""Whether a cell's database answers, as the API level sees it (the compute
API, the super conductor, the scheduler's host records).

One cell's trouble must stay in that cell: a read of a cell gets a short
deadline, and a cell whose read failed or timed out is *skipped* for a few
seconds (``CellUnavailable`` at once) instead of being waited on by every
caller. After that window one caller probes it again while the others keep
skipping; the first read that succeeds brings the cell back. Nothing else
is needed for recovery: no process restarts.

A database that refuses (stopped, unreachable) fails fast by itself; one
that *hangs* (accepts and never answers, or stops answering mid-query)
would hold a caller for as long as TCP lets it. Reads therefore run on a
thread of their own and the caller stops waiting at the deadline. The
abandoned read keeps its thread until the driver gives up; while one is
stuck the cell is not probed again, so a hung cell costs a bounded number
of threads rather than one per request.

Writes (``deadline=False``) run on the caller's thread: a write abandoned
at a deadline could still commit later, behind the caller's back.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

LOG = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_SKIP_S = 5.0


class CellUnavailable(Exception):
    """The cell's database did not answer (now, or recently enough that it is
    being skipped)."""

    def __init__(self, cell: str, reason: str) -> None:
        super().__init__(f"cell {cell} is unavailable: {reason}")
        self.cell = cell
        self.reason = reason


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database is out of reach (rather than a bug):
    a refused or lost connection, a server shutting down, a pool exhausted
    by reads that never came back. Any OperationalError counts: the driver's
    word for trouble outside the statement (transient ones — deadlocks, lock
    timeouts — were already retried by ``store.tx``)."""
    if isinstance(exc, (CellUnavailable, PoolTimeout, TimeoutError, ConnectionError, OperationalError,
                        InterfaceError)):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    from billeting.placement.store.outage import unavailable_reason

    return unavailable_reason(exc) is not None or exc.connection_invalidated


@dataclasses.dataclass(frozen=True)
class HealthSettings:
    # A read of a cell that takes longer than this counts as the cell being down.
    timeout_s: float = DEFAULT_TIMEOUT_S
    # How long a cell that failed is skipped before it is tried again.
    skip_s: float = DEFAULT_SKIP_S

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.skip_s < 0:
            raise ValueError("the cell read timeout must be positive and the skip window not negative")


@dataclasses.dataclass
class _CellState:
    down_since: float | None = None   # None: answering
    retry_at: float = float("-inf")   # skipped until then
    reason: str = ""
    stuck: int = 0                    # reads past their deadline that have not returned yet


@dataclasses.dataclass
class _Outcome:
    """A read running on its own thread; ``done`` is set once it returned."""
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    value: object = None
    error: BaseException | None = None
    abandoned: bool = False


Listener = Callable[[str, bool, str], None]   # (cell, up, reason)


class CellHealth:
    """Thread-safe. One per process, shared by everything that reads cells."""

    def __init__(self, settings: HealthSettings | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings or HealthSettings()
        self.clock = clock
        self._lock = threading.Lock()
        self._cells: dict[str, _CellState] = {}
        self._listeners: list[Listener] = []

    def on_change(self, listener: Listener) -> None:
        """``listener(cell, up, reason)`` after a cell goes down or comes back."""
        self._listeners.append(listener)

    # --- state ---------------------------------------------------------------------

    def is_down(self, cell: str) -> bool:
        state = self._cells.get(cell)
        return state is not None and state.down_since is not None

    def down_cells(self) -> frozenset[str]:
        with self._lock:
            return frozenset(c for c, s in self._cells.items() if s.down_since is not None)

    def mark_down(self, cell: str, reason: str) -> None:
        with self._lock:
            state = self._cells.setdefault(cell, _CellState())
            went_down = state.down_since is None
            if went_down:
                state.down_since = self.clock()
            state.retry_at = self.clock() + self.settings.skip_s
            state.reason = reason
        if went_down:
            LOG.warning("cell %s is unavailable (%s): skipped for %g s at a time until it answers",
                        cell, reason, self.settings.skip_s)
            self._notify(cell, False, reason)

    def mark_up(self, cell: str) -> None:
        state = self._cells.get(cell)
        if state is None or state.down_since is None:
            return  # (the common case, without the lock)
        with self._lock:
            came_back = state.down_since is not None
            down_for = self.clock() - state.down_since if came_back else 0.0
            state.down_since, state.retry_at, state.reason = None, float("-inf"), ""
        if came_back:
            LOG.warning("cell %s answers again (it was unavailable for %.1f s)", cell, down_for)
            self._notify(cell, True, "")

    def _notify(self, cell: str, up: bool, reason: str) -> None:
        for listener in self._listeners:
            try:
                listener(cell, up, reason)
            except Exception:  # noqa: BLE001 - a listener never breaks a read
                LOG.exception("cell health listener failed")

    def _admit(self, cell: str) -> None:
        """Raise CellUnavailable while ``cell`` is being skipped; otherwise let
        this caller through (as the one probe, when the cell is down)."""
        state = self._cells.get(cell)
        if state is None or (state.down_since is None and not state.stuck):
            return
        with self._lock:
            now = self.clock()
            if state.stuck:
                # A read of it is still hanging: a new one would hang as well.
                raise CellUnavailable(cell, state.reason or "a read of it has not returned")
            if state.down_since is None:
                return
            if now < state.retry_at:
                raise CellUnavailable(cell, state.reason)
            # This caller probes; the others keep skipping until it is done.
            state.retry_at = now + self.settings.timeout_s + self.settings.skip_s

    # --- calls ---------------------------------------------------------------------

    def call(self, cell: str, work: Callable[[], T], *, deadline: bool = True) -> T:
        """``work()``'s result, or CellUnavailable when the cell is being
        skipped, refused, failed as unreachable, or (``deadline``) took longer
        than the timeout. Any other error of ``work`` is raised as it is."""
        self._admit(cell)
        if not deadline:
            try:
                value = work()
            except Exception as exc:
                if is_unreachable(exc):
                    self.mark_down(cell, _reason(exc))
                    raise CellUnavailable(cell, _reason(exc)) from exc
                raise
            self.mark_up(cell)
            return value
        outcome = _Outcome()

        def run() -> None:
            try:
                outcome.value = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                outcome.error = exc
            with self._lock:
                outcome.done.set()
                if outcome.abandoned:
                    self._cells[cell].stuck -= 1
            if outcome.abandoned:
                LOG.info("an abandoned read of cell %s returned at last", cell)

        threading.Thread(target=run, name=f"cell-read-{cell}", daemon=True).start()
        if not outcome.done.wait(self.settings.timeout_s):
            with self._lock:
                if not outcome.done.is_set():
                    outcome.abandoned = True
                    self._cells.setdefault(cell, _CellState()).stuck += 1
            if outcome.abandoned:
                reason = f"no answer within {self.settings.timeout_s:g} s"
                self.mark_down(cell, reason)
                raise CellUnavailable(cell, reason)
        if outcome.error is not None:
            exc = outcome.error
            if is_unreachable(exc):
                self.mark_down(cell, _reason(exc))
                raise CellUnavailable(cell, _reason(exc)) from exc
            raise exc
        self.mark_up(cell)
        return outcome.value  # type: ignore[return-value]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, CellUnavailable):
        return exc.reason
    from billeting.placement.store.outage import unavailable_reason

    return unavailable_reason(exc) or exc.__class__.__name__
