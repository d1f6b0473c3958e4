"""Issue 28: a fresh scheduler worker whose first requests arrive together
must not crash. msgspec built a type's decoding info on its first convert,
and two threads doing that at once crashed the process (SIGSEGV); the
types are now built at import (``billeting.typeinfo``). ``first_requests``
forks workers the way ``billeting scheduler serve`` does and fires each
request shape from 8 threads at once; on the old code about a third of the
workers died."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from billeting.apidb import migrate as api_migrate
from billeting.placement.store import migrate as placement_migrate
from billeting.common.db.engine import make_engine
from billeting.placement.store.sync import sync_standard_names
from tests.concurrency.serve import clean_environ

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
WORKERS = 16


def test_concurrent_first_requests_do_not_crash_a_fresh_worker(tmp_path):
    url = f"sqlite:///{tmp_path / 'all.sqlite'}"
    engine = make_engine(url)
    placement_migrate.upgrade(engine)
    sync_standard_names(engine)
    api_migrate.upgrade(engine)
    engine.dispose()
    env = clean_environ(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "tests.scheduler.service.first_requests", url, str(WORKERS)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "crashed=0 failed=0", done.stderr[-3000:]
