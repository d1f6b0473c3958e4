"""A virtual clock: discrete events, and tasks that sleep in virtual time.

Each in-flight request runs as a greenlet (a ``Task``). When it "waits" —
for a Placement answer, an RPC cast, a build — it schedules its own wake-up
and switches back to the loop, which resumes whatever is due next. So two
scheduler calls really interleave between their GET /allocation_candidates
and their claims, and lose claims to each other against the real Placement,
while the run stays deterministic: events at the same instant run in the
order they were scheduled.

Real time spent suspended is tracked per task, so the real cost of a piece
of code that sleeps in the middle can be measured without the time other
tasks ran meanwhile (``Task.suspended_s``).
"""
from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from greenlet import getcurrent, greenlet


class Task(greenlet):
    """A greenlet with the bookkeeping the clock needs."""

    def __init__(self, run: Callable[..., Any], parent: greenlet) -> None:
        super().__init__(run, parent)
        self.suspended_s = 0.0   # real seconds spent switched out
        self.name = getattr(run, "__name__", "task")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Any, tuple]] = []
        self._seq = 0
        self._loop: greenlet | None = None
        self._stopped = False
        self.events = 0

    # --- scheduling ------------------------------------------------------------------

    def _push(self, at: float, target: Any, args: tuple) -> None:
        if at < self.now:
            at = self.now
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, target, args))

    def call_at(self, at: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in the loop at virtual time ``at`` (it must not sleep)."""
        self._push(at, fn, args)

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        self._push(self.now + delay, fn, args)

    def spawn(self, fn: Callable[..., Any], *args: Any, delay: float = 0.0) -> Task:
        """Start ``fn(*args)`` as a task ``delay`` virtual seconds from now."""
        if self._loop is None:
            raise RuntimeError("tasks are spawned while the clock runs (or from a call_at callback)")
        task = Task(fn, self._loop)
        self._push(self.now + delay, task, args)
        return task

    def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds`` of virtual time."""
        task = getcurrent()
        if not isinstance(task, Task):
            raise RuntimeError("sleep() is for tasks; the loop itself cannot wait")
        self._push(self.now + max(0.0, seconds), task, ())
        self._suspend(task)

    def _suspend(self, task: Task) -> Any:
        started = time.perf_counter()
        assert self._loop is not None
        value = self._loop.switch()
        task.suspended_s += time.perf_counter() - started
        return value

    def wake(self, task: Task, value: Any = None) -> None:
        """Resume a task parked with ``park()`` at the current instant."""
        self._push(self.now, task, (value,))

    def park(self) -> Any:
        """Suspend the calling task until someone calls ``wake(task)``."""
        task = getcurrent()
        if not isinstance(task, Task):
            raise RuntimeError("park() is for tasks")
        return self._suspend(task)

    # --- running ---------------------------------------------------------------------

    def stop(self) -> None:
        """End ``run()`` after the current event; what is still scheduled never happens."""
        self._stopped = True

    def run(self, until: float | None = None) -> None:
        """Process events in time order until none are left, ``until``, or ``stop()``."""
        self._loop = getcurrent()
        self._stopped = False
        try:
            while self._heap and not self._stopped:
                at, _, target, args = self._heap[0]
                if until is not None and at > until:
                    self.now = until
                    return
                heapq.heappop(self._heap)
                self.now = at
                self.events += 1
                if isinstance(target, greenlet):
                    if not target.dead:
                        target.switch(*args)
                else:
                    target(*args)
        finally:
            self._loop = None

    @property
    def pending(self) -> int:
        return len(self._heap)


class Semaphore:
    """At most ``limit`` holders at once, in virtual time; waiters are served in arrival order."""

    def __init__(self, clock: Clock, limit: int) -> None:
        self.clock = clock
        self.free = limit
        self._waiting: deque[Task] = deque()

    def acquire(self) -> None:
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return
        self._waiting.append(getcurrent())  # type: ignore[arg-type]
        self.clock.park()

    def release(self) -> None:
        if self._waiting:
            self.clock.wake(self._waiting.popleft())  # the slot passes straight on
        else:
            self.free += 1
