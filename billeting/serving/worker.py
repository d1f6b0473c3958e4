"""A gunicorn worker process: an asyncio event loop in front, a thread pool behind.

The loop owns every socket (accepting, reading, timing out, writing) and
gives the application threads only complete requests. It stops accepting
while all its threads are busy, so a connection waiting in the listen queue
goes to a sibling worker with a free thread, as it would with gunicorn's
own thread worker.

Signals: SIGTERM and SIGINT stop gracefully (no new connections, partial
requests answered 503, requests in the application finished and answered);
SIGQUIT stops at once; SIGABRT is the master's verdict on a stuck worker.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

from gunicorn.workers.base import Worker

from billeting.serving import loop_parts
from billeting.serving.options import ServeOptions
from billeting.serving.protocol import HttpConnection
from billeting.serving.wsgi import AppResponse, CompleteRequest

LOG = logging.getLogger("billeting.serving")

HEARTBEAT_S = 1.0
# accept() failing for want of file descriptors: wait this long before trying again.
ACCEPT_BACKOFF_S = 0.5
# A worker leaves a new connection to a sibling holding fewer for steps of
# DEFER_STEP_S, up to MAX_DEFER_S in all, then takes it itself.
DEFER_STEP_S = 0.005
MAX_DEFER_S = 0.025
# Connections accepted per wake-up at most: a burst in the listen queue is
# taken in a few loop turns, not one turn per connection.
ACCEPT_BATCH = 32
# A worker holding two connections more than an accepting sibling closes one
# kept-alive connection after answering on it, at most once per SHED_EVERY_S,
# so that the client's next connection lands on the sibling (see sheds_one).
SHED_EVERY_S = 0.1


def end_process(status: int) -> None:
    """Exit now, without interpreter teardown, once logs and stdio are flushed."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


class LoopWorker(Worker):
    """Configured through ``self.app.options`` (a ``ServeOptions``)."""

    def init_signals(self) -> None:
        # Until the loop runs (the app is being loaded) a stop signal just ends
        # the process; run() installs the real handlers.
        for sig in self.SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            signal.signal(sig, lambda *_: sys.exit(0))
        signal.signal(signal.SIGABRT, self.handle_abort)
        signal.signal(signal.SIGWINCH, signal.SIG_IGN)

    def run(self) -> None:
        with asyncio.Runner(loop_factory=loop_parts.new_event_loop) as runner:
            runner.run(self._serve())
        # Every connection is closed and every request answered. Tearing the
        # interpreter down (freeing every module and object of a large app)
        # takes longer than the whole stop should: end the process directly.
        self.log.info("Worker exiting (pid: %s)", self.pid)
        end_process(0)

    async def _serve(self) -> None:
        self.options: ServeOptions = self.app.options
        self.loop = asyncio.get_running_loop()
        self.pool = ThreadPoolExecutor(self.options.threads, thread_name_prefix="app")
        self.connections: set[HttpConnection] = set()
        self.busy = 0  # requests handed to the pool and not finished
        self.stopping = False
        self.accepting = False
        self.done = asyncio.Event()
        self.listeners = [listener.sock for listener in self.sockets]
        self.multiprocess = self.options.workers > 1
        self.board = self.app.board
        self.board_slot: int = getattr(self, "board_slot", -1)
        self.deferred_s = 0.0  # how long the waiting connection has been left to siblings
        self.paused_until = 0.0  # loop time: accepting is paused until then
        self.adopting = 0  # accepted, not yet connection_opened
        self.shed_after = 0.0  # loop time: no connection is shed before then
        self._raise_fd_limit()

        loop = self.loop
        loop.add_signal_handler(signal.SIGTERM, self.begin_stop)
        loop.add_signal_handler(signal.SIGINT, self.begin_stop)
        loop.add_signal_handler(signal.SIGQUIT, self._quit)
        loop.add_signal_handler(signal.SIGUSR1, self.log.reopen_files)
        for listener in self.listeners:
            listener.setblocking(False)
        self._update_accepting()
        heartbeat = loop.create_task(self._heartbeat())
        sweep = loop.create_task(loop_parts.sweep(loop, self.connections))
        try:
            await self.done.wait()
        finally:
            heartbeat.cancel()
            sweep.cancel()
            self.pool.shutdown(wait=False, cancel_futures=True)
            # Stopped: a later stop signal (``timeout`` and the master both send
            # one) is ignored. Left to the loop, one arriving while the runner
            # closes it is written to its closed wakeup pipe, and Python prints
            # "Exception ignored ... BrokenPipeError" with a traceback.
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
                loop.remove_signal_handler(sig)
                signal.signal(sig, signal.SIG_IGN)

    # --- ConnectionHost -------------------------------------------------------------

    def submit(self, request: CompleteRequest) -> asyncio.Future[AppResponse]:
        self.busy += 1
        self.nr += 1
        self._update_accepting()
        return loop_parts.run_in_pool(self.loop, self.pool, self.wsgi, request, self.options,
                                      multiprocess=self.multiprocess, finished=self._request_finished)

    def _request_finished(self, _future) -> None:
        self.busy -= 1
        self._update_accepting()

    def connection_opened(self, conn: HttpConnection) -> None:
        self.connections.add(conn)
        loop_parts.make_room(self.connections, self.options.max_connections)
        self._update_accepting()

    def sheds_one(self) -> bool:
        """Should the connection just answered be closed, so that its client
        reconnects to a sibling holding at least two fewer?

        Balancing new connections (``_accept``) cannot move the kept-alive
        ones: those a worker took while its siblings were still loading the
        application, or while one was being replaced after a crash, would stay
        with it for as long as their clients live, leaving the siblings'
        cores idle. Closing one after a complete answer (``Connection:
        close``) costs its client one reconnect and loses nothing; one per
        SHED_EVERY_S at most, so a large imbalance evens out over a few
        tenths of a second without a storm of reconnects."""
        if self.stopping or not self.multiprocess:
            return False
        now = self.loop.time()
        if now < self.shed_after:
            return False
        mine = len(self.connections) + self.adopting
        if mine < 2 or not self.board.someone_has_fewer(self.board_slot, mine - 1):
            return False
        self.shed_after = now + SHED_EVERY_S
        LOG.debug("closing a kept-alive connection after its answer: %d here, a sibling holds fewer", mine)
        return True

    def connection_closed(self, conn: HttpConnection) -> None:
        self.connections.discard(conn)
        self._publish()
        if self.stopping:
            self._maybe_done()
        else:
            self._update_accepting()

    # --- accepting ---------------------------------------------------------------------

    def _publish(self) -> None:
        # Not accepting, or pausing to leave a connection to a sibling: -1, so
        # that no sibling leaves one to this worker meanwhile. (Two workers
        # one apart used to pause for each other in turn: a burst of new
        # connections was accepted at a few hundred a second.)
        count = len(self.connections) + self.adopting if self.accepting else -1
        self.board.publish(self.board_slot, self.pid, count)

    def _update_accepting(self) -> None:
        want = (not self.stopping and self.busy < self.options.threads
                and len(self.connections) < self.options.max_connections
                and self.loop.time() >= self.paused_until)
        if want == self.accepting:
            self._publish()
            return
        self.accepting = want
        for listener in self.listeners:
            if want:
                self.loop.add_reader(listener.fileno(), self._accept, listener)
            else:
                self.loop.remove_reader(listener.fileno())
        self._publish()

    def _accept(self, listener: socket.socket) -> None:
        try:
            for _ in range(ACCEPT_BATCH):
                # While a sibling holds fewer connections, leave the waiting one in
                # the queue for it (briefly: it may be busy, or gone); see balance.py.
                if (self.deferred_s < MAX_DEFER_S
                        and self.board.someone_has_fewer(self.board_slot, len(self.connections) + self.adopting)):
                    self.deferred_s += DEFER_STEP_S
                    self._pause_accepting(DEFER_STEP_S)
                    return
                self.deferred_s = 0.0
                try:
                    sock, _ = listener.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    return
                except OSError as exc:
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        LOG.warning("cannot accept connections for now: %s", exc.strerror)
                        self._pause_accepting(ACCEPT_BACKOFF_S)
                        return
                    raise
                loop_parts.prepare_accepted(sock)
                self.adopting += 1
                self.loop.create_task(self._adopt(sock))
        finally:
            self._publish()

    def _pause_accepting(self, seconds: float, *, publish: bool = True) -> None:
        self.paused_until = self.loop.time() + seconds
        if self.accepting:
            self.accepting = False
            for listener in self.listeners:
                self.loop.remove_reader(listener.fileno())
            if publish:
                self._publish()
        self.loop.call_later(seconds, self._resume_accepting)

    def _resume_accepting(self) -> None:
        # uvloop's timers may fire up to a millisecond before the loop's own
        # clock reaches their time; ``_update_accepting`` would then find the
        # pause not over and leave the listener unwatched, with nothing left
        # to look again: an idle worker would never accept another connection.
        remaining = self.paused_until - self.loop.time()
        if remaining > 0:
            self.loop.call_later(max(remaining, 0.001), self._resume_accepting)
            return
        self._update_accepting()

    async def _adopt(self, sock: socket.socket) -> None:
        try:
            await loop_parts.adopt(self.loop, self, self.options, sock)
        finally:
            self.adopting -= 1

    # --- life cycle -------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            self.notify()
            self._publish()  # also the heartbeat siblings check
            if os.getppid() != self.ppid and not self.stopping:
                LOG.warning("the master process went away; stopping")
                self.begin_stop()
            await asyncio.sleep(HEARTBEAT_S)

    def begin_stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.alive = False
        self._update_accepting()
        for listener in self.listeners:
            listener.close()  # the master and siblings hold their own copies
        for conn in list(self.connections):
            conn.shutdown()
        self._maybe_done()

    def _maybe_done(self) -> None:
        # Requests still in the application keep their connection open until answered.
        if not self.connections and not self.done.is_set():
            self.done.set()

    def _quit(self) -> None:
        self.alive = False
        end_process(0)

    def _raise_fd_limit(self) -> None:
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            wanted = self.options.max_connections + 64 * self.options.threads + 256
            if soft != resource.RLIM_INFINITY and soft < wanted:
                new_soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
        except (ImportError, ValueError, OSError):
            pass
