"""A worker that pauses accepting (to leave a connection to a sibling, or
for want of file descriptors) must always start again.

uvloop's timers can fire a little before the loop's clock reaches their
time. A worker that then found its pause "not over" stopped watching its
listener for good, and a server whose workers had both paused once was
silent to every new connection while idle (seen as a 30 s timeout of a
plain GET after a burst of scheduler traffic)."""
from __future__ import annotations

import asyncio
import socket

from billeting.serving import loop_parts
from billeting.serving.balance import ConnectionBoard
from billeting.serving.options import ServeOptions
from billeting.serving.worker import DEFER_STEP_S, LoopWorker

PAUSES = 200


def bare_worker(loop, listener) -> LoopWorker:
    """A LoopWorker with just what accepting needs (no gunicorn arbiter)."""
    worker = object.__new__(LoopWorker)
    worker.options = ServeOptions(host="127.0.0.1", port=0, threads=2)
    worker.loop = loop
    worker.listeners = [listener]
    worker.connections = set()
    worker.busy = worker.adopting = 0
    worker.stopping = worker.accepting = False
    worker.deferred_s = worker.paused_until = 0.0
    worker.board = ConnectionBoard(1)
    worker.board_slot = 0
    worker.pid = 1
    return worker


def test_every_pause_ends_with_the_listener_watched_again():
    loop = loop_parts.new_event_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    try:
        async def pauses() -> int:
            worker = bare_worker(loop, listener)
            worker._update_accepting()
            assert worker.accepting
            resumed = 0
            for _ in range(PAUSES):
                worker._pause_accepting(DEFER_STEP_S, publish=False)
                assert not worker.accepting
                for _ in range(200):  # a second, far longer than any pause
                    await asyncio.sleep(0.005)
                    if worker.accepting:
                        resumed += 1
                        break
                else:
                    return resumed
            loop.remove_reader(listener.fileno())
            return resumed

        assert loop.run_until_complete(pauses()) == PAUSES
    finally:
        listener.close()
        loop.close()
