"""Insert the standard resource classes and traits that are missing.

Idempotent and safe when several workers start at once: every insert is
conflict-tolerant, so a row another worker inserted first is simply kept.
Nothing is ever deleted.
"""
from __future__ import annotations

import datetime as dt

import os_resource_classes
import os_traits
from sqlalchemy import Connection, Engine, select

from billeting.placement.store import tables as t
from billeting.placement.store.tx import run_write
from billeting.placement.store.upsert import insert_ignoring_duplicates


def sync_standard_names(engine: Engine) -> None:
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)

    def work(conn: Connection) -> None:
        have_rc = set(conn.execute(select(t.resource_classes.c.name)).scalars())
        rc_rows = [
            {"id": idx, "name": name, "created_at": now}
            for idx, name in enumerate(os_resource_classes.STANDARDS)
            if name not in have_rc
        ]
        insert_ignoring_duplicates(conn, t.resource_classes, rc_rows)
        have_traits = set(conn.execute(select(t.traits.c.name)).scalars())
        trait_rows = [
            {"name": name, "created_at": now}
            for name in sorted(os_traits.get_traits())
            if name not in have_traits
        ]
        insert_ignoring_duplicates(conn, t.traits, trait_rows)

    run_write(engine, work)
