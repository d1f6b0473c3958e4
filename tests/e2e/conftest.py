"""Fixtures of the distributed end-to-end tests: PostgreSQL databases and
RabbitMQ vhosts of the test's own. They run once per CI run, in the
PostgreSQL pass (``BILLETING_TEST_DB=postgresql``), and are skipped otherwise."""
from __future__ import annotations

import logging
import os

import pytest

from tests.conftest import _create_database
from tests.e2e.deploy import CellSetup, Deployment



@pytest.fixture
def restore_logging():
    """The one-shot commands run in-process reconfigure the root logger."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def databases(tmp_path_factory):
    """name -> URL of a fresh PostgreSQL database, dropped after the test."""
    if os.environ.get("BILLETING_TEST_DB") != "postgresql":
        pytest.skip("the distributed end-to-end tests run on PostgreSQL only (BILLETING_TEST_DB=postgresql)")
    made = {}

    def make(name: str) -> str:
        made[name] = _create_database(tmp_path_factory)
        return made[name].url

    yield make
    for db in made.values():
        db.drop()


@pytest.fixture
def deployment_factory(databases, amqp_vhost_factory, tmp_path, restore_logging):
    """Builds (not yet starts) a Deployment; stops every process afterwards."""
    made: list[Deployment] = []

    def make(cells: dict[str, tuple[str, ...]]) -> Deployment:
        deployment = Deployment(
            placement_db=databases("placement"), api_db=databases("api"), api_bus=amqp_vhost_factory(),
            cell0_db=databases("cell0"),
            cells=[CellSetup(name, databases(name), amqp_vhost_factory(), hosts) for name, hosts in cells.items()],
            workdir=tmp_path)
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.stop()
