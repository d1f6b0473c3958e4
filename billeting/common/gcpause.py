"""Make Python's cyclic garbage collector rare while a large answer is built.

A big candidates answer creates tens of thousands of small dicts and lists.
With the default thresholds every 700 new containers trigger a collection,
and the older generations are walked again and again, so building the
answer costs far more than it should. While any answer is being built the
first generation's threshold is raised, so a 10,000-provider answer costs
a handful of collections instead of hundreds. Collection is never switched
off: a server that always has a request in flight still frees cyclic
garbage, so memory stays bounded.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# New containers between first-generation collections while answers are built.
BUILD_THRESHOLD = 200_000

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, ...] = ()


@contextmanager
def paused() -> Iterator[None]:
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(BUILD_THRESHOLD, _saved[0]), *_saved[1:])
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.set_threshold(*_saved)
