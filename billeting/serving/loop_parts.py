"""Loop-side pieces shared by both fronts: the forked worker (``worker.py``)
and the one in a thread of ``billeting up`` (``in_thread.py``).

Both own an asyncio loop, a set of ``HttpConnection``s and a thread pool for
the application; they differ in how they accept (the worker balances with
its siblings and pauses on ``EMFILE``) and how they stop, so only these
steps are shared.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import socket
from collections.abc import Callable, Collection
from concurrent.futures import Executor
from functools import partial
from operator import itemgetter

from billeting.serving.options import ServeOptions
from billeting.serving.protocol import HttpConnection
from billeting.serving.wsgi import AppResponse, CompleteRequest, WSGIApp, call_app

LOG = logging.getLogger("billeting.serving")

# How often deadlines are checked: timeouts fire up to this much late.
SWEEP_S = 0.1
# At most this many deadlines are handled per sweep (the earliest first):
# a thousand clients that stalled together would otherwise be answered 408
# in one go, holding every other client up for tens of milliseconds.
EXPIRE_PER_SWEEP = 64
# Accepting at the connection limit sheds this share of it at a time, the
# connections that have waited longest on their clients (see ``make_room``).
SHED_SHARE = 16


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


async def sweep(loop: asyncio.AbstractEventLoop, connections: Collection[HttpConnection]) -> None:
    """Time out connections whose phase deadline passed (header, body,
    keep-alive, linger), forever; cancel the task to stop."""
    while True:
        await asyncio.sleep(SWEEP_S)
        now = loop.time()
        due = [c for c in connections if c.deadline <= now]
        if len(due) > EXPIRE_PER_SWEEP:
            due = heapq.nsmallest(EXPIRE_PER_SWEEP, due, key=_deadline)
        for conn in due:
            conn.expired()


def _deadline(conn: HttpConnection) -> float:
    return conn.deadline


def make_room(connections: Collection[HttpConnection], max_connections: int) -> None:
    """At the connection limit, shed the connections that have waited
    longest on their clients (nothing sent, or half a request; and any
    error answer lingering for its client to read it) so that new clients
    are served instead of left in the listen queue until the stalled ones
    time out. Shed a share at a time, so a flood of new connections costs
    one scan per share, not one per connection."""
    if len(connections) < max_connections:
        return
    live = []
    for conn in list(connections):
        if conn.lingering:
            conn.shed()  # answered already, only waiting for its client to read it
        elif not conn.closing:
            live.append(conn)
    if len(live) < max_connections:  # the rest are on their way out
        return
    waiting = [(since, conn) for conn in live if (since := conn.stalled_since()) is not None]
    shed = heapq.nsmallest(max(1, max_connections // SHED_SHARE), waiting, key=itemgetter(0))
    if shed:
        LOG.warning("%d connections open, the limit: shedding the %d that waited longest on their clients",
                    len(live), len(shed))
    for _, conn in shed:
        conn.shed()
