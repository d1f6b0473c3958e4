"""The usage kept on inventory rows (``inventories.used``) follows every
write that changes allocations, on every backend.

Candidates and provider summaries read that column instead of summing
allocations, so a write path that forgot it would offer full hosts (or hide
free ones). Each test runs one kind of write and then compares the column
with the allocations row by row, and with what the API reports."""
from __future__ import annotations

import pytest
from sqlalchemy import inspect, select

from billeting.placement import allocations, stock
from billeting.placement.store import migrate, tables as t
from tests.placement.api.test_allocations import generation_of, new_uuid, put_allocations, set_inventory
from tests.placement.api.test_reshaper import SERVICE, consumer_entry, reshape


def _kept(engine) -> dict[tuple[int, int], int]:
    inv = t.inventories
    with engine.connect() as conn:
        return {(p, c): int(u) for p, c, u in conn.execute(
            select(inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.used))}


def assert_in_step(engine) -> None:
    """Kept usage equals the allocation rows, and every provider's stock
    (placement/stock.py) its inventory rows."""
    with engine.connect() as conn:
        assert allocations.usage_out_of_step(conn) == []
        assert stock.out_of_step(conn) == []


def usages_of(client, rp: str) -> dict[str, int]:
    return client.get(f"/resource_providers/{rp}/usages").json["usages"]


def _summary_used(client, resources: str) -> dict[str, dict[str, int]]:
    """Per provider uuid, per class, the ``used`` figures of the candidates' summaries."""
    resp = client.get(f"/allocation_candidates?resources={resources}", mv="1.39")
    assert resp.status == 200, resp
    return {rp: {rc: v["used"] for rc, v in summary["resources"].items()}
            for rp, summary in resp.json["provider_summaries"].items()}


@pytest.fixture
def hosts(client, create_provider):
    made = []
    for name in ("h1", "h2"):
        uuid = create_provider(name)["uuid"]
        set_inventory(client, uuid, {"VCPU": 8, "MEMORY_MB": 4096})
        made.append(uuid)
    return made


def test_put_replace_and_clear(client, engine, hosts):
    h1, h2 = hosts
    consumer = new_uuid()
    assert put_allocations(client, consumer, {h1: {"VCPU": 2, "MEMORY_MB": 512}}).status == 204
    assert sum(_kept(engine).values()) == 514
    assert_in_step(engine)
    # Moving the consumer gives the first host its usage back.
    assert put_allocations(client, consumer, {h2: {"VCPU": 3}}, generation=1).status == 204
    assert_in_step(engine)
    assert usages_of(client, h1) == {"VCPU": 0, "MEMORY_MB": 0}
    assert _summary_used(client, "VCPU:1")[h2]["VCPU"] == 3
    # PUT {} clears it.
    assert put_allocations(client, consumer, {}, generation=2).status == 204
    assert_in_step(engine)
    assert set(_kept(engine).values()) == {0}


def test_delete_gives_usage_back(client, engine, hosts):
    h1, h2 = hosts
    consumer = new_uuid()
    assert put_allocations(client, consumer, {h1: {"VCPU": 1}, h2: {"VCPU": 1, "MEMORY_MB": 128}}).status == 204
    other = new_uuid()
    assert put_allocations(client, other, {h1: {"VCPU": 4}}).status == 204
    assert client.delete(f"/allocations/{consumer}").status == 204
    assert_in_step(engine)
    assert _summary_used(client, "VCPU:1") == {h1: {"VCPU": 4, "MEMORY_MB": 0}, h2: {"VCPU": 0, "MEMORY_MB": 0}}


def test_post_moves_between_consumers(client, engine, hosts):
    """A migration: the instance's source allocation goes to a migration
    consumer and the instance takes the destination, in one POST."""
    h1, h2 = hosts
    instance, migration = new_uuid(), new_uuid()
    assert put_allocations(client, instance, {h1: {"VCPU": 2, "MEMORY_MB": 256}}).status == 204
    body = {
        migration: {"allocations": {h1: {"resources": {"VCPU": 2, "MEMORY_MB": 256}}}, "project_id": "p",
                    "user_id": "u", "consumer_generation": None, "consumer_type": "MIGRATION"},
        instance: {"allocations": {h2: {"resources": {"VCPU": 2, "MEMORY_MB": 256}}}, "project_id": "p",
                   "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"},
    }
    assert client.post("/allocations", json=body, mv="1.38").status == 204
    assert_in_step(engine)
    assert _summary_used(client, "VCPU:1")[h1]["VCPU"] == 2
    assert _summary_used(client, "VCPU:1")[h2]["VCPU"] == 2


def test_refused_write_changes_nothing(client, engine, hosts):
    h1, _ = hosts
    assert put_allocations(client, new_uuid(), {h1: {"VCPU": 6}}).status == 204
    before = _kept(engine)
    assert put_allocations(client, new_uuid(), {h1: {"VCPU": 6}}).status == 409
    assert _kept(engine) == before
    assert_in_step(engine)


def test_inventory_changes_keep_usage(client, engine, hosts):
    h1, _ = hosts
    assert put_allocations(client, new_uuid(), {h1: {"VCPU": 5}}).status == 204
    # Shrinking below usage is allowed; the usage stays and the host is full.
    set_inventory(client, h1, {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 10})
    assert_in_step(engine)
    assert h1 not in _summary_used(client, "VCPU:1")
    resp = client.put(f"/resource_providers/{h1}/inventories/VCPU",
                      json={"resource_provider_generation": generation_of(client, h1), "total": 16}, mv="1.39")
    assert resp.status == 200, resp
    assert_in_step(engine)
    assert _summary_used(client, "VCPU:1")[h1]["VCPU"] == 5


def test_reshaper_moves_usage_to_the_child(client, engine, create_provider):
    root = create_provider("root")["uuid"]
    child = create_provider("child", parent=root)["uuid"]
    set_inventory(client, root, {"VCPU": 10, "DISK_GB": 100})
    instance = new_uuid()
    assert put_allocations(client, instance, {root: {"VCPU": 8, "DISK_GB": 10}}).status == 204
    body = {
        "inventories": {
            root: {"resource_provider_generation": generation_of(client, root),
                   "inventories": {"DISK_GB": {"total": 100}}},
            child: {"resource_provider_generation": generation_of(client, child),
                    "inventories": {"VCPU": {"total": 10, "max_unit": 8}}},
        },
        "allocations": {instance: consumer_entry({root: {"DISK_GB": 10}, child: {"VCPU": 8}}, 1)},
    }
    assert reshape(client, body, headers=SERVICE).status == 204
    assert_in_step(engine)
    assert usages_of(client, child) == {"VCPU": 8}
    resp = client.get("/allocation_candidates?resources=VCPU:2", mv="1.39")
    assert resp.json["provider_summaries"][child]["resources"]["VCPU"] == {"capacity": 10, "used": 8}
    # 10 - 8 left: three more do not fit.
    assert client.get("/allocation_candidates?resources=VCPU:3", mv="1.39").json["allocation_requests"] == []


def test_out_of_step_rows_are_found_and_recounted(client, engine, hosts):
    """Allocation rows written around Placement (a restore, a manual repair)."""
    h1, _ = hosts
    assert put_allocations(client, new_uuid(), {h1: {"VCPU": 3}}).status == 204
    inv = t.inventories
    with engine.begin() as conn:
        conn.execute(inv.update().values(used=0))
    with engine.connect() as conn:
        found = allocations.usage_out_of_step(conn)
    assert [(f.kept, f.allocated) for f in found] == [(0, 3)]
    with engine.begin() as conn:
        assert allocations.recount_usage(conn) == 1
    assert_in_step(engine)


def test_migration_fills_kept_usage_from_stored_allocations(client, engine, hosts):
    """A database from before the column: upgrading counts what is allocated."""
    h1, h2 = hosts
    assert put_allocations(client, new_uuid(), {h1: {"VCPU": 3}, h2: {"MEMORY_MB": 100}}).status == 204
    assert put_allocations(client, new_uuid(), {h1: {"VCPU": 2}}).status == 204
    migrate.HISTORY.downgrade(engine, "0003")
    with engine.connect() as conn:
        assert "used" not in {c["name"] for c in inspect(conn).get_columns("inventories")}
    migrate.upgrade(engine)
    assert_in_step(engine)
    assert sorted(v for v in _kept(engine).values() if v) == [5, 100]
