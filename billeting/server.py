"""Run the Placement WSGI app under gunicorn, configured from ``Settings``.

The master only binds the socket and supervises; each worker process builds
its own engine and app after the fork (``load`` runs in the worker because
``preload_app`` is off), so no database connection is ever shared across
processes. SIGTERM stops gracefully, SIGINT quickly; both exit 0.
"""
from __future__ import annotations

import logging

from gunicorn.app.base import BaseApplication

from billeting.config import Settings

LOG = logging.getLogger("billeting")

# Idle keep-alive connections and in-flight requests get this long after SIGTERM.
GRACEFUL_TIMEOUT_S = 10


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class PlacementServer(BaseApplication):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__(prog="billeting serve")

    def gunicorn_options(self) -> dict[str, object]:
        settings = self.settings
        url = f"http://{bind_address(settings.host, settings.port)}/"

        def when_ready(_arbiter) -> None:
            LOG.info("ready: %s", url)

        return {
            "bind": [bind_address(settings.host, settings.port)],
            "workers": settings.workers,
            # gthread: keep-alive support and several requests per process
            # while one waits on the database.
            "worker_class": "gthread",
            "threads": settings.threads,
            "graceful_timeout": GRACEFUL_TIMEOUT_S,
            "timeout": 60,
            "keepalive": 2,
            "preload_app": False,
            "proc_name": "billeting",
            "loglevel": settings.log_level.lower(),
            "errorlog": "-",
            "accesslog": "-" if settings.log_level == "DEBUG" else None,
            # Several servers on one machine (tests, benchmarks) must not
            # fight over gunicorn's default control socket path.
            "control_socket_disable": True,
            "when_ready": when_ready,
        }

    def load_config(self) -> None:
        for name, value in self.gunicorn_options().items():
            if name in self.cfg.settings:  # older gunicorn lacks some settings
                self.cfg.set(name, value)

    def load(self):
        """Runs in each worker after the fork."""
        from billeting.placement.api.app import make_app
        from billeting.placement.store.engine import make_engine

        engine = make_engine(self.settings.db_url, pool_size=max(2, self.settings.threads))
        return make_app(self.settings, engine)
