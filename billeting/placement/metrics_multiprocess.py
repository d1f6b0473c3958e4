"""Multi-process metrics: what a pre-forking master calls, one function each.

    handle = prepare_multiprocess()   # in the master, before forking workers
    on_worker_exit(pid)               # whenever a worker process has ended
    handle.cleanup()                  # when the master exits

prometheus_client decides where a metric's values live (private memory, or
memory-mapped files in ``PROMETHEUS_MULTIPROC_DIR`` that any worker's
``GET /metrics`` adds up) when the metric is built. ``prepare_multiprocess``
sets the directory and, when the metrics were already built in this process
(the master builds the app once to check its configuration), builds them
again so that the forked workers inherit file-backed ones.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass

ENV = "PROMETHEUS_MULTIPROC_DIR"


@dataclass(frozen=True, slots=True)
class MultiprocessDir:
    """The directory a master created for its workers' metric files."""

    path: str
    owner_pid: int

    def cleanup(self) -> None:
        """Remove the directory. A no-op in any other process than its creator:
        a forked worker unwinding through the master's stack must not remove it."""
        if os.getpid() != self.owner_pid:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        if os.environ.get(ENV) == self.path:
            del os.environ[ENV]


def prepare_multiprocess(parent: str | None = None) -> MultiprocessDir:
    """Create a fresh, empty directory for the workers' metric files and point
    prometheus_client at it (through the environment the workers inherit)."""
    path = tempfile.mkdtemp(prefix="billeting-metrics-", dir=parent)
    os.environ[ENV] = path
    values = sys.modules.get("prometheus_client.values")
    if values is not None:
        values.ValueClass = values.get_value_class()
    metrics = sys.modules.get("billeting.placement.metrics")
    if metrics is not None:
        metrics.rebuild()
    return MultiprocessDir(path=path, owner_pid=os.getpid())


def on_worker_exit(pid: int) -> None:
    """A worker has ended: drop its live gauges (pool use, cache size) from the
    sums. Its counters and histograms stay counted."""
    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
