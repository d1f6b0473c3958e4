"""How many connections each worker holds, visible to all of them.

The kernel wakes one worker per new connection on the shared listening
socket, whichever it picks, so a burst of keep-alive connections (a
benchmark, a pool of clients starting together) can land mostly on one
worker and leave the other's core idle for as long as they live. With this
board, a worker woken for a connection while a live sibling holds fewer
leaves it in the queue for a few milliseconds (see ``LoopWorker._accept``),
and the sibling, polling the same socket, takes it.

The board is an anonymous shared mapping made by the master before it forks
anything: one slot per worker of (pid, open connections or -1 when not
accepting, last heartbeat). The master assigns a slot before each fork and
frees it when it reaps the worker. Read without locks: the counts are a
hint, and a stale one costs only a less even split.
"""
from __future__ import annotations

import mmap
import struct
import time

_SLOT = struct.Struct("qqd")  # pid, open connections (-1: not accepting), heartbeat (monotonic s)
# A sibling silent for this long is stuck or dead: nothing is left to it.
STALE_S = 3.0


class ConnectionBoard:
    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._mem = mmap.mmap(-1, slots * _SLOT.size)

    # --- master ----------------------------------------------------------------------

    def claim(self) -> int:
        """A free slot for a worker about to be forked, marked taken (pid -1) at once."""
        for index in range(self.slots):
            pid, _, _ = _SLOT.unpack_from(self._mem, index * _SLOT.size)
            if pid == 0:
                _SLOT.pack_into(self._mem, index * _SLOT.size, -1, -1, 0.0)
                return index
        return -1  # more workers than slots: this one just does not take part

    def release(self, slot: int) -> None:
        if slot >= 0:
            _SLOT.pack_into(self._mem, slot * _SLOT.size, 0, -1, 0.0)

    # --- workers -----------------------------------------------------------------------

    def publish(self, slot: int, pid: int, connections: int) -> None:
        """``connections`` is -1 while the worker does not accept (all its threads busy)."""
        if slot >= 0:
            _SLOT.pack_into(self._mem, slot * _SLOT.size, pid, connections, time.monotonic())

    def someone_has_fewer(self, slot: int, connections: int) -> bool:
        """Does a live worker other than ``slot``, accepting now, hold fewer open connections?"""
        fresh = time.monotonic() - STALE_S
        for index in range(self.slots):
            if index == slot:
                continue
            pid, count, beat = _SLOT.unpack_from(self._mem, index * _SLOT.size)
            if pid > 0 and 0 <= count < connections and beat > fresh:
                return True
        return False
