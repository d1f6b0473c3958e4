"""Multi-process metrics for a master other than ``billeting serve``: the
shared plumbing of ``billeting.serving.metrics``, under the name this
module has always had.

    handle = prepare_multiprocess()   # in the master, before forking workers
    on_worker_exit(pid)               # whenever a worker process has ended
    handle.cleanup()                  # when the master exits
"""
from __future__ import annotations

from billeting.serving.metrics import ENV, MultiprocessDir, on_worker_exit, prepare_multiprocess

__all__ = ["ENV", "MultiprocessDir", "on_worker_exit", "prepare_multiprocess"]
