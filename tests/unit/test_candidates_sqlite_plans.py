"""SQLite's query plans for single-provider candidates stay index-driven.

SQLite keeps no statistics unless ANALYZE runs, so it picks indexes by rule.
Usage used to be summed from allocations, and two plans made the
simulator's 5,000-host fleet slow down as it filled (measured in 2026-11;
see BENCHMARKS.md's git history). Usage now sits on the inventory rows; these tests
read the plans SQLite chose for the statements actually sent."""
from __future__ import annotations

import pytest
from sqlalchemy import event

from tests.placement.api.test_allocation_candidates_fleet import Fleet

pytestmark = pytest.mark.usefixtures("summary_paths")

@pytest.fixture
def sqlite_only(engine):
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's planner only")


def _plans(engine, work) -> list[tuple[str, list[str]]]:
    """(statement, plan details) of every SELECT ``work`` sends."""
    sent: list[tuple[str, object]] = []

    def listener(_conn, _cursor, statement, parameters, _context, _many):
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", listener)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    plans = []
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        for statement, parameters in sent:
            plans.append((statement, [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + statement,
                                                                    parameters)]))
    return plans


def _fleet(client, hosts: int) -> None:
    fleet = Fleet(client)
    for i in range(hosts):
        fleet.provider(f"cn{i}", inventory={"VCPU": 64, "MEMORY_MB": 65536, "DISK_GB": 1000})
    for i in range(hosts):
        fleet.allocate({f"cn{i}": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10}})


def _reads(table: str, statement: str) -> bool:
    return f"FROM {table}" in statement or f"{table} AS" in statement or f"JOIN {table}" in statement


@pytest.mark.parametrize("limit", ["&limit=5", ""])
def test_single_provider_queries_read_usage_by_provider(client, engine, sqlite_only, limit):
    _fleet(client, 12)

    def run():
        resp = client.get(f"/allocation_candidates?resources=VCPU:1,MEMORY_MB:256,DISK_GB:5{limit}", mv="1.39")
        assert resp.status == 200 and resp.json["allocation_requests"]

    plans = _plans(engine, run)
    # Usage is kept on the inventory rows: no candidates statement sums
    # allocations, a table that grows with every instance.
    assert not [statement for statement, _ in plans if _reads("allocations", statement)], plans
    inventory_plans = [details for statement, details in plans if _reads("inventories", statement)]
    # A small window read whole takes each provider's stock row instead of
    # its inventory rows (placement/stock.py); only the summary cache, where
    # it serves, still reads inventories.
    if not (limit and any("AS stock" in statement for statement, _ in plans)):
        assert inventory_plans, plans
    for details in inventory_plans:
        # Inventories are probed or ranged through an index, never scanned whole.
        assert not any(d.startswith("SCAN inv") for d in details), details
