"""Fixtures for scheduler (and conductor) tests, registered in tests/conftest.py: a real Placement (this run's database)
reached in-process or over HTTP, a fleet builder and a scheduler on top."""
from __future__ import annotations

import random
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from billeting.placement.api.app import make_app
from billeting.placement_client import http_client
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler import Scheduler, SchedulerSettings
from billeting.scheduler.catalog import PlacementHostCatalog
from tests.scheduler.fleet import Fleet


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def placement(engine, settings):
    return InProcessPlacementClient(engine, settings)


@pytest.fixture
def placement_url(engine, settings):
    """Billeting's Placement served over real HTTP on a free port."""
    server = make_server("127.0.0.1", 0, make_app(settings, engine), server_class=_ThreadingServer,
                         handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def http_placement(placement_url):
    client = http_client(placement_url)
    yield client
    client.close()


@pytest.fixture
def fleet(placement):
    return Fleet(placement)


@pytest.fixture
def make_scheduler(placement, fleet):
    def make(settings: SchedulerSettings | None = None, *, client=None, catalog=None, seed: int = 7) -> Scheduler:
        client = client or placement
        catalog = catalog or PlacementHostCatalog(client, fleet.directory, refresh_s=0)
        return Scheduler(client, catalog, fleet.directory, settings, rng=random.Random(seed))
    return make
