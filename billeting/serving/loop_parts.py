"""Loop-side pieces shared by both fronts: the forked worker (``worker.py``)
and the one in a thread of ``billeting up`` (``in_thread.py``).

Both own an asyncio loop, a set of ``HttpConnection``s and a thread pool for
the application; they differ in how they accept (the worker balances with
its siblings and pauses on ``EMFILE``) and how they stop, so only these
steps are shared.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from functools import partial

from billeting.serving.options import ServeOptions
from billeting.serving.protocol import HttpConnection
from billeting.serving.wsgi import AppResponse, CompleteRequest, WSGIApp, call_app

LOG = logging.getLogger("billeting.serving")

# How often deadlines are checked: timeouts fire up to this much late.
SWEEP_S = 0.1


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, else asyncio's. libuv in C makes
    the loop's share of a request (callbacks, hand-offs to and from the
    application threads) cheaper: +5 % providers/s in the load benchmark."""
    try:
        import uvloop
    except ImportError:  # (not built for every platform)
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_in_pool(loop: asyncio.AbstractEventLoop, pool: Executor, app: WSGIApp, request: CompleteRequest,
                options: ServeOptions, *, multiprocess: bool,
                finished: Callable[[asyncio.Future], None]) -> asyncio.Future[AppResponse]:
    """Hand one complete request to an application thread; ``finished`` runs
    on the loop when it is answered (to start accepting again)."""
    future = loop.run_in_executor(
        pool, partial(call_app, app, request, options.render_error, multiprocess=multiprocess))
    future.add_done_callback(finished)
    return future


def prepare_accepted(sock: socket.socket) -> None:
    """A freshly accepted socket, ready for the loop: non-blocking, and no
    Nagle delay on small answers."""
    sock.setblocking(False)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def adopt(loop: asyncio.AbstractEventLoop, host, options: ServeOptions, sock: socket.socket) -> None:
    """Wrap an accepted socket in an ``HttpConnection`` served by ``host``."""
    try:
        await loop.connect_accepted_socket(partial(HttpConnection, host, options), sock)
    except OSError as exc:  # the client reset the connection before we got to it
        LOG.debug("dropped a connection at accept: %s", exc)
        sock.close()


async def sweep(loop: asyncio.AbstractEventLoop, connections: Iterable[HttpConnection]) -> None:
    """Time out connections whose phase deadline passed (header, body,
    keep-alive, linger), forever; cancel the task to stop."""
    while True:
        await asyncio.sleep(SWEEP_S)
        now = loop.time()
        for conn in [c for c in connections if c.deadline <= now]:
            conn.expired()
