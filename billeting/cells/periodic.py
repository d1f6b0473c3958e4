"""Periodic tasks of a cell service, on one thread.

Each task runs every ``interval`` seconds, the first time one interval
after start (or after ``initial_delay``); an interval <= 0 switches it off. A task that raises is logged and
runs again at its next turn: periodic work must never kill a service.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

LOG = logging.getLogger(__name__)


@dataclass
class _Task:
    name: str
    interval: float
    fn: Callable[[], object]
    due: float = field(default=0.0)


class Periodic:
    def __init__(self, name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self._tasks: list[_Task] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, name: str, interval: float, fn: Callable[[], object], *, initial_delay: float | None = None) -> None:
        if interval <= 0:
            return  # switched off
        delay = interval if initial_delay is None else initial_delay
        self._tasks.append(_Task(name, interval, fn, self.clock() + delay))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"periodic-{self.name}", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Stop after the task running now, without waiting for it."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.clock()
            for task in self._tasks:
                if self._stop.is_set():
                    return
                if task.due <= now:
                    try:
                        task.fn()
                    except Exception:  # noqa: BLE001 - a failing task must not stop the others
                        LOG.exception("%s: periodic task %s failed", self.name, task.name)
                    task.due = self.clock() + task.interval
            next_due = min((t.due for t in self._tasks), default=now + 1.0)
            self._stop.wait(max(0.05, min(1.0, next_due - self.clock())))
