"""The supervising master: gunicorn's arbiter, used as a process manager only.

It binds the socket, forks ``workers`` worker processes (``LoopWorker``),
replaces any that die or stop reporting, and stops them on a signal. Each
worker calls ``load_app`` after the fork, so nothing built by the
application (database engines, pools, threads) is ever shared between
processes.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter

from billeting.serving.balance import ConnectionBoard
from billeting.serving.options import ServeOptions
from billeting.serving.worker import LoopWorker, end_process
from billeting.serving.wsgi import WSGIApp


class _Arbiter(Arbiter):
    def handle_int(self) -> None:
        # Ctrl-C stops as gracefully as SIGTERM: requests in flight are
        # answered (a second Ctrl-C during the wait still stops at once).
        raise StopIteration


class _Application(BaseApplication):
    def __init__(self, options: ServeOptions, load_app: Callable[[], WSGIApp]) -> None:
        self.options = options
        self.load_app = load_app
        # Made before any fork, so every worker shares it (see balance.py).
        self.board = ConnectionBoard(options.workers * 2 + 2)
        super().__init__(prog=options.process_name)

    def load_config(self) -> None:
        options = self.options

        board = self.board

        def when_ready(_arbiter) -> None:
            if options.on_ready is not None:
                options.on_ready(options.url)

        def pre_fork(_arbiter, worker) -> None:
            worker.board_slot = board.claim()

        def worker_gone(_arbiter, worker) -> None:
            board.release(getattr(worker, "board_slot", -1))

        def child_exit(arbiter, worker) -> None:
            worker_gone(arbiter, worker)
            if options.on_worker_exit is not None:
                options.on_worker_exit(worker.pid)

        settings = {
            "bind": [options.bind],
            "workers": options.workers,
            "worker_class": LoopWorker,
            # gunicorn counts these in whole seconds.
            "graceful_timeout": math.ceil(options.graceful_timeout),
            "timeout": math.ceil(options.worker_timeout),
            "preload_app": False,
            "proc_name": options.process_name,
            "loglevel": options.log_level.lower(),
            "errorlog": "-",
            "accesslog": None,  # the worker logs requests itself, at DEBUG
            # Several servers on one machine (tests, benchmarks) must not
            # fight over gunicorn's default control socket path.
            "control_socket_disable": True,
            "when_ready": when_ready,
            "pre_fork": pre_fork,
            "child_exit": child_exit,
            "worker_exit": worker_gone,
        }
        for name, value in settings.items():
            if name in self.cfg.settings:  # older gunicorn lacks some settings
                self.cfg.set(name, value)

    def load(self) -> WSGIApp:
        return self.load_app()

    def run(self) -> None:
        _Arbiter(self).run()


def run(options: ServeOptions, load_app: Callable[[], WSGIApp]) -> None:
    """Serve until SIGTERM/SIGINT; ``load_app`` runs in each worker after the fork.

    Never returns: ends the process with status 0 on a requested stop,
    non-zero when workers cannot boot.
    """
    try:
        _Application(options, load_app).run()
    except SystemExit as stop:
        # As in the workers: skip the interpreter teardown, which can take
        # longer than the rest of a stop.
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if options.on_exit is not None:
            options.on_exit()  # the master's own clean-up (workers end in their own code)
        end_process(status)
