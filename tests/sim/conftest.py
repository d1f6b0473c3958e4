"""The simulator runs its own in-process SQLite Placement whatever backend
the suite is on, so its tests run once, in the SQLite pass; only the tests
that take the suite's database (the ``placement`` fixture) run on every
backend."""
from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("BILLETING_TEST_DB", "sqlite") == "sqlite":
        return
    skip = pytest.mark.skip(reason="backend-independent simulator test; runs in the SQLite pass")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and "placement" not in getattr(item, "fixturenames", ()):
            item.add_marker(skip)
