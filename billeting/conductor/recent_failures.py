"""A cell conductor's short memory of hosts that just failed a build.

An instance's alternates were chosen before any of them failed; a host that
failed another instance's build a moment ago is likely to fail this one too
(a broken host fails every build until it disables itself or an operator
steps in). While walking alternates the conductor tries such hosts last:
only when no other alternate could be claimed. Never skipping them outright
keeps one unlucky random failure from sending a build to ERROR that its
alternate could still have run.

The memory is per conductor process, holds at most ``max_hosts`` hosts
(the oldest failures are forgotten first) and forgets a host
``window_s`` after its last failure; a host's successful build elsewhere in
the cell is not seen here, so the window is kept short.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

DEFAULT_WINDOW_S = 60.0
DEFAULT_MAX_HOSTS = 1024


class RecentFailures:
    """Thread-safe (the conductor handles messages on several threads)."""

    def __init__(self, window_s: float = DEFAULT_WINDOW_S, max_hosts: int = DEFAULT_MAX_HOSTS, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if window_s < 0 or max_hosts < 1:
            raise ValueError("window_s must not be negative and max_hosts must be at least 1")
        self.window_s = window_s
        self.max_hosts = max_hosts
        self.clock = clock
        self._lock = threading.Lock()
        self._last: OrderedDict[str, float] = OrderedDict()  # host -> time of its last failure, oldest first

    def failed(self, host: str | None) -> None:
        if not host or self.window_s <= 0:
            return
        with self._lock:
            self._last.pop(host, None)
            self._last[host] = self.clock()
            while len(self._last) > self.max_hosts:
                self._last.popitem(last=False)

    def hosts(self) -> frozenset[str]:
        """Hosts that failed within the window."""
        now = self.clock()
        with self._lock:
            while self._last and now - next(iter(self._last.values())) > self.window_s:
                self._last.popitem(last=False)
            return frozenset(self._last)

    def __len__(self) -> int:
        return len(self.hosts())
