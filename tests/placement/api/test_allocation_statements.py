"""What the claim and release paths send: statements built once and only
bound per call, and a release that reads its consumer with its rows."""
from __future__ import annotations

from contextlib import contextmanager

import pytest
from sqlalchemy import event
from sqlalchemy.sql import ClauseElement

from billeting.placement import consumers
from tests.placement.api.test_allocations import new_uuid, put_allocations, set_inventory


@pytest.fixture
def host(client, create_provider):
    uuid = create_provider("host")["uuid"]
    set_inventory(client, uuid, {"VCPU": 8, "MEMORY_MB": 4096})
    return uuid


@contextmanager
def watching(engine):
    """Every statement object executed, and every SQL text sent, while open."""
    executed: list[ClauseElement] = []
    sent: list[str] = []

    def before_execute(conn, clauseelement, multiparams, params, execution_options):
        if isinstance(clauseelement, ClauseElement):
            executed.append(clauseelement)

    def before_cursor(conn, cursor, statement, parameters, context, executemany):
        sent.append(" ".join(statement.split()))

    event.listen(engine, "before_execute", before_execute)
    event.listen(engine, "before_cursor_execute", before_cursor)
    try:
        yield executed, sent
    finally:
        event.remove(engine, "before_execute", before_execute)
        event.remove(engine, "before_cursor_execute", before_cursor)


def _claim_and_release(client, engine, host):
    consumer = new_uuid()
    with watching(engine) as (claim, _):
        assert put_allocations(client, consumer, {host: {"VCPU": 2, "MEMORY_MB": 512}}).status == 204
    with watching(engine) as (release, sent):
        assert client.delete(f"/allocations/{consumer}").status == 204
    return claim, release, sent


def test_claims_and_releases_reuse_their_statements(client, engine, host):
    # A statement built per call costs its construction and its cache key
    # each time; built once, SQLAlchemy memoizes both.
    _claim_and_release(client, engine, host)  # (creates the project and user)
    first = _claim_and_release(client, engine, host)
    second = _claim_and_release(client, engine, host)
    for before, after in zip(first[:2], second[:2]):
        assert before and [id(s) for s in after] == [id(s) for s in before], [str(s)[:60] for s in after]


def test_a_release_reads_its_consumer_and_rows_in_one_statement(client, engine, host):
    _, _, sent = _claim_and_release(client, engine, host)
    reads = [s for s in sent if s.startswith("SELECT")]
    of_consumer = [s for s in reads if "FROM consumers" in s]
    assert len(of_consumer) == 1 and "allocations" in of_consumer[0]
    assert client.get(f"/resource_providers/{host}/usages").json["usages"] == {"VCPU": 0, "MEMORY_MB": 0}
    # The stock is remade by the database in its UPDATE (placement/stock.py
    # refresh): no read of the inventory rows to write it back.
    refreshes = [s for s in sent if s.startswith("UPDATE resource_providers SET stock")]
    assert len(refreshes) == 1 and "FROM inventories" in refreshes[0], sent
    if engine.dialect.name == "sqlite":
        # No provider lock to take there (placement/stock.py lock): the
        # consumer read only.
        assert len(reads) == 1, reads


def test_get_holding_sums_rows_and_knows_consumers_without_any(client, engine, host):
    held_uuid, bare_uuid = new_uuid(), new_uuid()
    assert put_allocations(client, held_uuid, {host: {"VCPU": 3, "MEMORY_MB": 256}}).status == 204
    with engine.connect() as conn, conn.begin() as tx:
        # (a consumer without allocations exists only inside a write; made here directly)
        consumers.create_many(conn, [(bare_uuid, consumers.Owner("p", "u"))])
        found, held = consumers.get_holding(conn, [held_uuid, bare_uuid, new_uuid()])
        assert set(found) == {held_uuid, bare_uuid}
        assert found[held_uuid] == consumers.get(conn, held_uuid)
        assert found[bare_uuid].id not in held
        by_class = {class_id: amount for (_, class_id), amount in held[found[held_uuid].id].items()}
        assert sorted(by_class.values()) == [3, 256]
        one, one_held = consumers.get_holding(conn, [held_uuid])
        assert one == {held_uuid: found[held_uuid]} and one_held == {found[held_uuid].id: held[found[held_uuid].id]}
        tx.rollback()


def test_one_host_claims_and_releases_send_no_in_lists(client, engine, host):
    # An expanding IN is rendered anew on every execution; the lists of a
    # one-host claim hold one key each, matched with a cached "=" instead
    # (common/db/keys.py).
    _claim_and_release(client, engine, host)
    consumer = new_uuid()
    with watching(engine) as (_, claim):
        assert put_allocations(client, consumer, {host: {"VCPU": 2, "MEMORY_MB": 512}}).status == 204
    with watching(engine) as (_, release):
        assert client.delete(f"/allocations/{consumer}").status == 204
    assert [s for s in claim + release if " IN (" in s] == []
