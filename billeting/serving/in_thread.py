"""The serving front in a thread of the current process, for ``billeting up``.

The all-in-one cannot fork workers (its services share ``memory://`` buses
and in-process computes), but it faces the same clients as ``billeting
serve``: it gets the same event-loop front (``protocol.HttpConnection``:
complete requests only, header/body/keep-alive timeouts, 413s, chunked
bodies, errors in the service's format), here as one asyncio loop in a
daemon thread with a small thread pool behind it. A stalled client costs
a socket, never an application thread.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

from billeting.serving import loop_parts
from billeting.serving.options import ServeOptions
from billeting.serving.protocol import HttpConnection
from billeting.serving.wsgi import AppResponse, CompleteRequest, WSGIApp

LOG = logging.getLogger("billeting.serving")

ACCEPT_BATCH = 32  # connections accepted per wake-up at most


class ThreadedServer:
    """Serve one WSGI app on ``options.host:options.port`` (port 0: any free
    one) until ``stop()``. ``url`` is known once the constructor returns."""

    def __init__(self, app: WSGIApp, options: ServeOptions) -> None:
        self.app = app
        self.options = options
        self.listener = socket.create_server((options.host, options.port), backlog=128, reuse_port=False)
        self.listener.setblocking(False)
        host, port = self.listener.getsockname()[:2]
        self.url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
        self.connections: set[HttpConnection] = set()
        self.busy = 0
        self.accepting = False
        self.stopping = False
        self.pool = ThreadPoolExecutor(options.threads, thread_name_prefix=f"{options.process_name}-app")
        self.loop = loop_parts.new_event_loop()
        self._done: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=f"{options.process_name}-http", daemon=True)
        self._started = threading.Event()
        self._thread.start()
        self._started.wait()

    # --- ConnectionHost -------------------------------------------------------------

    def submit(self, request: CompleteRequest) -> asyncio.Future[AppResponse]:
        self.busy += 1
        self._update_accepting()
        return loop_parts.run_in_pool(self.loop, self.pool, self.app, request, self.options,
                                      multiprocess=False, finished=self._request_finished)

    def _request_finished(self, _future) -> None:
        self.busy -= 1
        self._update_accepting()

    def connection_opened(self, conn: HttpConnection) -> None:
        self.connections.add(conn)
        loop_parts.make_room(self.connections, self.options.max_connections)
        self._update_accepting()

    def sheds_one(self) -> bool:
        return False  # one loop, no siblings to hand a connection to

    def connection_closed(self, conn: HttpConnection) -> None:
        self.connections.discard(conn)
        if self.stopping and not self.connections and self._done is not None:
            self._done.set()
        self._update_accepting()

    # --- the loop ---------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())
        self.loop.close()

    async def _serve(self) -> None:
        self._done = asyncio.Event()
        self._update_accepting()
        sweep = self.loop.create_task(loop_parts.sweep(self.loop, self.connections))
        self._started.set()
        try:
            await self._done.wait()
        finally:
            sweep.cancel()

    def _update_accepting(self) -> None:
        # Busy threads or too many sockets: leave new connections in the
        # listen queue rather than take requests no thread can run.
        want = (not self.stopping and self.busy < self.options.threads
                and len(self.connections) < self.options.max_connections)
        if want == self.accepting:
            return
        self.accepting = want
        if want:
            self.loop.add_reader(self.listener.fileno(), self._accept)
        else:
            self.loop.remove_reader(self.listener.fileno())

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:  # out of descriptors: try again shortly
                LOG.warning("cannot accept connections for now: %s", exc.strerror)
                self.accepting = False
                self.loop.remove_reader(self.listener.fileno())
                self.loop.call_later(0.5, self._update_accepting)
                return
            loop_parts.prepare_accepted(sock)
            self.loop.create_task(loop_parts.adopt(self.loop, self, self.options, sock))

    # --- stopping ---------------------------------------------------------------------

    def _begin_stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self._update_accepting()
        self.listener.close()
        for conn in list(self.connections):
            conn.shutdown()  # idle ones close now; requests in flight are answered first
        if not self.connections and self._done is not None:
            self._done.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop accepting, finish the requests in flight (up to ``timeout``,
        default the options' graceful timeout), close every connection."""
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self._begin_stop)
        self._thread.join(self.options.graceful_timeout if timeout is None else timeout)
        self.pool.shutdown(wait=False, cancel_futures=True)
