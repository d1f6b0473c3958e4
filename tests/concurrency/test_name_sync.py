"""Several processes (say, API servers on different machines starting at
once) sync the standard resource classes and traits into one database at the
same moment: none fails, and every name ends up there exactly once."""
from __future__ import annotations

import multiprocessing

import os_resource_classes
import os_traits
import pytest
from sqlalchemy import delete, func, select

from billeting.placement.store import tables as t
from billeting.common.db.engine import make_engine
from billeting.placement.store.sync import sync_standard_names

pytestmark = pytest.mark.slow

PROCESSES = 4


def _sync(db_url: str, barrier, errors) -> None:
    engine = make_engine(db_url, pool_size=1)
    try:
        barrier.wait(timeout=30)
        sync_standard_names(engine)
    except BaseException as exc:  # reported to the parent, which fails the test
        errors.put(f"{type(exc).__name__}: {exc}")
    finally:
        engine.dispose()


def test_concurrent_sync_from_several_processes(private_engine):
    # A database of its own, starting without the standard names: emptying
    # the shared one would give its standard traits new ids on PostgreSQL and
    # MySQL behind the back of caches that rightly assume they never change.
    engine = private_engine
    db_url = engine.url.render_as_string(hide_password=False)
    with engine.begin() as conn:
        conn.execute(delete(t.traits))
        conn.execute(delete(t.resource_classes))

    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_sync, args=(db_url, barrier, errors)) for _ in range(PROCESSES)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    reported = []
    while not errors.empty():
        reported.append(errors.get())
    assert reported == []
    assert [proc.exitcode for proc in procs] == [0] * PROCESSES

    with engine.connect() as conn:
        rc_names = list(conn.execute(select(t.resource_classes.c.name)).scalars())
        trait_names = list(conn.execute(select(t.traits.c.name)).scalars())
        rc_ids = dict(conn.execute(select(t.resource_classes.c.name, t.resource_classes.c.id)).all())
        assert conn.scalar(select(func.count()).select_from(t.traits)) == len(set(trait_names))
    assert sorted(rc_names) == sorted(os_resource_classes.STANDARDS)
    assert sorted(trait_names) == sorted(os_traits.get_traits())
    # Standard classes keep their well-known ids whichever process won.
    assert all(rc_ids[name] == index for index, name in enumerate(os_resource_classes.STANDARDS))
