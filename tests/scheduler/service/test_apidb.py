"""The API database: migrations on every backend (alone or beside Placement's
schema), the SQL directory's freshness, host reports."""
from __future__ import annotations

import datetime as dt

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from billeting.apidb import migrate, tables
from billeting.apidb.directory import SqlDirectory
from billeting.apidb.host_reports import HostReportLoader
from billeting.placement.store import migrate as placement_migrate
from billeting.common.db.engine import make_engine
from billeting.scheduler.catalog import HostReport
from billeting.scheduler.service import hosts, metadata, topology
from tests.conftest import _create_database


@pytest.fixture
def empty_db(tmp_path_factory):
    db = _create_database(tmp_path_factory)
    eng = make_engine(db.url)
    yield eng
    eng.dispose()
    db.drop()


def _diff(engine):
    def ours(obj, name, type_, reflected, compare_to):
        return not (type_ == "table" and reflected and compare_to is None)

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": ours})
        return compare_metadata(ctx, tables.metadata)


def test_upgrade_from_empty_builds_exactly_the_declared_schema_and_downgrades(empty_db):
    assert migrate.current_revision(empty_db) is None
    migrate.upgrade(empty_db)
    assert migrate.is_current(empty_db)
    assert _diff(empty_db) == []
    migrate.downgrade(empty_db)
    assert migrate.current_revision(empty_db) is None
    left = set(inspect(empty_db).get_table_names()) - {migrate.VERSION_TABLE}
    assert left == set()
    migrate.upgrade(empty_db)  # and up again
    assert migrate.is_current(empty_db)


def test_images_kept_before_disk_formats_existed_ask_for_none(empty_db):
    """Migration 0004 adds the image's disk format; older images get none, so
    request filter 3 asks nothing of the hosts for them."""
    from sqlalchemy import text

    from billeting.apidb import images

    migrate.upgrade(empty_db, "0003")
    with empty_db.begin() as conn:
        conn.execute(text("INSERT INTO images (id, name, properties, created_at) "
                          "VALUES ('old', 'old', '{}', CURRENT_TIMESTAMP)"))
    migrate.upgrade(empty_db)
    assert images.get(empty_db, "old").disk_format is None
    images.put(empty_db, "new", name="new", disk_format="qcow2")
    assert images.get(empty_db, "new").scheduler_image().disk_format == "qcow2"
    assert {i.id: i.disk_format for i in images.listing(empty_db)} == {"old": None, "new": "qcow2"}
    migrate.downgrade(empty_db, "0003")
    assert "disk_format" not in {c["name"] for c in inspect(empty_db).get_columns("images")}


def test_the_api_database_can_share_a_database_with_placement(empty_db):
    placement_migrate.upgrade(empty_db)
    migrate.upgrade(empty_db)
    assert placement_migrate.is_current(empty_db) and migrate.is_current(empty_db)
    assert _diff(empty_db) == []
    names = set(inspect(empty_db).get_table_names())
    assert {"alembic_version", migrate.VERSION_TABLE, "resource_providers", "server_groups"} <= names
    migrate.downgrade(empty_db)
    assert placement_migrate.is_current(empty_db)
    assert "resource_providers" in set(inspect(empty_db).get_table_names())


def test_another_process_sees_a_change_within_check_every(service, fleet, apidb):
    fleet.add("h1")
    now = [0.0]
    other = SqlDirectory(apidb, service.settings.topology_levels, check_every=5.0, clock=lambda: now[0])
    assert other.domain("rack", "r1") is None
    told = []
    other.on_change(lambda: told.append(True))
    topology.define(service, "rack", "r1", hosts=["h1"])
    now[0] = 4.0
    assert other.domain("rack", "r1") is None  # still within check_every
    now[0] = 5.5
    assert other.domain("rack", "r1").name == "r1" and told == [True]


def test_metadata_reaches_the_directory(service, apidb):
    agg = "8c1b8ad0-5b6e-4c47-9f3f-7d2bd2b0b7aa"
    metadata.put(service, agg, metadata={"ram_weight_multiplier": "-1.0", "filter_tenant_id": "p1",
                                         "availability_zone": "az9"})
    d = service.directory
    assert d.aggregate_metadata(agg)["ram_weight_multiplier"] == "-1.0"
    assert d.tenant_aggregates("p1") == {agg} and d.az_aggregates("az9") == {agg}
    assert agg in d.known_aggregates()


def test_host_reports_age_into_down(service, fleet, apidb):
    fleet.add("h1")
    hosts.put(service, "h1", HostReport(enabled=True, num_instances=3), heartbeat=True)
    hosts.put(service, "h2", HostReport(up=False), heartbeat=False)
    fresh = HostReportLoader(apidb, down_after_s=60)()
    assert fresh["h1"].up is True and fresh["h1"].num_instances == 3 and fresh["h2"].up is False
    later = HostReportLoader(apidb, down_after_s=60,
                             clock=lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(minutes=5))()
    assert later["h1"].up is False
    record = service.catalog.by_name("h1")[0]
    assert record.num_instances == 3 and record.up is True
