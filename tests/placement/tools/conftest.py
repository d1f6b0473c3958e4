"""A second Placement database and app: the target of imports."""
from __future__ import annotations

import pytest

from billeting.config import Settings
from billeting.placement.api.app import make_app
from billeting.placement.store import migrate
from billeting.common.db.engine import make_engine
from billeting.placement.store.sync import sync_standard_names
from tests.conftest import PlacementClient, _create_database, wipe


@pytest.fixture(scope="session")
def target_engine(tmp_path_factory):
    db = _create_database(tmp_path_factory)
    engine = make_engine(db.url)
    migrate.upgrade(engine)
    sync_standard_names(engine)
    yield engine
    engine.dispose()
    db.drop()


@pytest.fixture
def target_app(target_engine):
    yield make_app(Settings(db=target_engine.url.render_as_string(hide_password=False)), target_engine)
    wipe(target_engine)


@pytest.fixture
def target_client(target_app) -> PlacementClient:
    return PlacementClient(target_app)
