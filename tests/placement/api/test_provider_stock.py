"""A provider's stock (``resource_providers.stock``, placement/stock.py):
every inventory and its usage in one row, which sampled candidate searches
read instead of the inventory rows.

Each write kind must leave the text equal to the rows (test_kept_usage.py
checks that after every allocation write; here: inventory writes, concurrent
claims and releases, the migration). Readers really use it, fall back where
it is unknown, and a wrong text never lets a claim overcommit."""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import inspect, select, update

from billeting.placement import allocations, stock
from billeting.placement.store import migrate, tables as t
from tests.conftest import PlacementClient
from tests.placement.api.test_allocations import generation_of, new_uuid, put_allocations, set_inventory

_rp = t.resource_providers


def texts(engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        return dict(conn.execute(select(_rp.c.uuid, _rp.c.stock)).all())


def assert_in_step(engine) -> None:
    with engine.connect() as conn:
        assert stock.out_of_step(conn) == []


def sampled(client, resources: str = "VCPU:1", limit: int = 5) -> dict[str, dict]:
    """Summaries of a small sampled answer (the path that reads the stock)."""
    resp = client.get(f"/allocation_candidates?resources={resources}&limit={limit}", mv="1.39")
    assert resp.status == 200, resp
    return {rp: summary["resources"] for rp, summary in resp.json["provider_summaries"].items()}


def set_text(engine, rp: str, value: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(update(_rp).where(_rp.c.uuid == rp).values(stock=value))


def test_every_inventory_write_keeps_the_stock(client, engine, create_provider):
    rp = create_provider("host")["uuid"]
    set_inventory(client, rp, {"VCPU": 8, "MEMORY_MB": 4096})
    assert_in_step(engine)
    assert texts(engine)[rp] is not None
    resp = client.post(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": generation_of(client, rp), "resource_class": "DISK_GB", "total": 50})
    assert resp.status == 201, resp
    assert_in_step(engine)
    resp = client.put(f"/resource_providers/{rp}/inventories/VCPU", mv="1.39", json={
        "resource_provider_generation": generation_of(client, rp), "total": 16, "allocation_ratio": 1.5})
    assert resp.status == 200, resp
    assert_in_step(engine)
    assert sampled(client)[rp]["VCPU"] == {"capacity": 24, "used": 0}
    assert client.delete(f"/resource_providers/{rp}/inventories/DISK_GB").status == 204
    assert_in_step(engine)
    assert set(sampled(client)[rp]) == {"VCPU", "MEMORY_MB"}
    assert client.delete(f"/resource_providers/{rp}/inventories", mv="1.39").status == 204
    assert_in_step(engine)
    assert stock.decode(texts(engine)[rp]) == {}
    assert sampled(client) == {}


def reads_the_stock(test_database) -> None:
    if test_database.backend == "mysql":
        pytest.skip("MySQL answers sampled searches with its joined statement over the inventory rows")


def test_answers_are_made_from_the_stock(test_database, client, engine, create_provider):
    """A text changed behind Placement's back shows in the sampled answer:
    the search reads it, not the inventory rows."""
    reads_the_stock(test_database)
    rp = create_provider("host")["uuid"]
    set_inventory(client, rp, {"VCPU": 8})
    [item] = stock.decode(texts(engine)[rp]).values()
    claimed_full = stock.Stock(item.resource_class_id, 8, 0, 1, 8, 1, 1.0, 8)
    set_text(engine, rp, stock.encode([claimed_full]))
    assert sampled(client) == {}
    with engine.connect() as conn:
        assert stock.out_of_step(conn) == [conn.execute(select(_rp.c.id).where(_rp.c.uuid == rp)).scalar_one()]


def test_unknown_stock_is_read_from_the_inventories(client, engine, create_provider):
    rp = create_provider("host")["uuid"]
    set_inventory(client, rp, {"VCPU": 8, "MEMORY_MB": 1024})
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 3}}).status == 204
    set_text(engine, rp, None)
    assert sampled(client)[rp] == {"VCPU": {"capacity": 8, "used": 3}, "MEMORY_MB": {"capacity": 1024, "used": 0}}
    assert sampled(client, "VCPU:6") == {}
    # The next write puts it back.
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 1}}).status == 204
    assert texts(engine)[rp] is not None
    assert_in_step(engine)


def test_a_wrong_stock_never_overcommits(test_database, client, engine, create_provider):
    """A text that says a full host is empty gets the host offered; the
    claim, which sums allocation rows, still refuses it."""
    reads_the_stock(test_database)
    rp = create_provider("host")["uuid"]
    set_inventory(client, rp, {"VCPU": 4})
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 4}}).status == 204
    [item] = stock.decode(texts(engine)[rp]).values()
    set_text(engine, rp, stock.encode([stock.Stock(item.resource_class_id, 4, 0, 1, 4, 1, 1.0, 0)]))
    assert rp in sampled(client)
    resp = put_allocations(client, new_uuid(), {rp: {"VCPU": 1}})
    assert resp.status == 409
    assert "would exceed the capacity" in resp.error["detail"]


def test_recount_repairs_the_stock(client, engine, create_provider):
    rp = create_provider("host")["uuid"]
    set_inventory(client, rp, {"VCPU": 4})
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 2}}).status == 204
    set_text(engine, rp, "[]")
    with engine.begin() as conn:
        assert allocations.recount_usage(conn) == 1
    assert_in_step(engine)
    assert sampled(client)[rp] == {"VCPU": {"capacity": 4, "used": 2}}


def test_concurrent_claims_and_releases_leave_it_exact(test_database, app, client, engine, create_provider):
    """Claims and releases of one host's resources from many threads at once
    (releases do not bump the generation, so they are serialized by the
    provider row lock ``stock`` takes): the last text equals the rows."""
    hosts = [create_provider(f"h{i}")["uuid"] for i in range(2)]
    for rp in hosts:
        set_inventory(client, rp, {"VCPU": 64, "MEMORY_MB": 65536})
    failures: list[str] = []

    def churn(n: int) -> None:
        mine = PlacementClient(app)
        for i in range(6):
            consumer = new_uuid()
            rp = hosts[(n + i) % 2]
            resources = {"VCPU": 1} if i % 2 else {"MEMORY_MB": 256}
            resp = put_allocations(mine, consumer, {rp: resources})
            if resp.status != 204:
                failures.append(f"claim {resp.status}")
                continue
            if i % 3 != 2:     # keep some, give the rest back
                resp = mine.delete(f"/allocations/{consumer}")
                if resp.status != 204:
                    failures.append(f"release {resp.status}")

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert_in_step(engine)
    total_vcpu = sum(sampled(client, limit=10)[rp]["VCPU"]["used"] for rp in hosts)
    assert total_vcpu == sum(client.get(f"/resource_providers/{rp}/usages").json["usages"]["VCPU"]
                             for rp in hosts)


def test_migration_fills_the_stock(client, engine, create_provider):
    rp = create_provider("host")["uuid"]
    bare = create_provider("bare")["uuid"]
    set_inventory(client, rp, {"VCPU": 8, "DISK_GB": 100})
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 2}}).status == 204
    migrate.HISTORY.downgrade(engine, "0005")
    with engine.connect() as conn:
        assert "stock" not in {c["name"] for c in inspect(conn).get_columns("resource_providers")}
    migrate.upgrade(engine)
    assert_in_step(engine)
    assert stock.decode(texts(engine)[bare]) == {}
    assert sampled(client)[rp]["VCPU"] == {"capacity": 8, "used": 2}


@pytest.mark.parametrize("ratio", [1.0, 0.7, 16.0, 1.1])
def test_encoding_round_trips(ratio):
    items = [stock.Stock(2, 10, 1, 1, 10, 1, ratio, 3), stock.Stock(0, 2**40, 0, 1, 2**31, 7, ratio, 0)]
    assert stock.decode(stock.encode(items)) == {item.resource_class_id: item for item in items}


@pytest.mark.parametrize("ratio", [1.1, 0.1 + 0.2, 16.0, 2 / 3])
def test_the_database_writes_each_ratio_exactly(client, engine, create_provider, ratio):
    """The text is made by the database (SQLite's JSON alone would keep 15
    digits: 0.30000000000000004 would read back as 0.3)."""
    rp = create_provider("host")["uuid"]
    resp = client.put(f"/resource_providers/{rp}/inventories", mv="1.39", json={
        "resource_provider_generation": generation_of(client, rp),
        "inventories": {"VCPU": {"total": 9, "allocation_ratio": ratio}, "MEMORY_MB": {"total": 2**31 - 1}}})
    assert resp.status == 200, resp
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 2}}).status == 204
    assert_in_step(engine)
    decoded = {item.total: item for item in stock.decode(texts(engine)[rp]).values()}
    assert decoded[9].allocation_ratio == ratio and decoded[9].used == 2
    assert decoded[2**31 - 1].allocation_ratio == 1.0 and decoded[2**31 - 1].used == 0
