"""Allocation rows have no foreign key to resource_classes (migration 0005):
the write path already admits allocations only where an inventory of the
class exists, and inventories keep their own key to the class. The
guarantees the key gave must hold without it, and the upgrade must keep
every stored allocation."""
from __future__ import annotations

from sqlalchemy import func, inspect, select

from billeting.placement.store import migrate, tables as t
from tests.placement.api.test_allocations import new_uuid, put_allocations, set_inventory


def _class_keys(engine) -> list[dict]:
    with engine.connect() as conn:
        return [fk for fk in inspect(conn).get_foreign_keys("allocations")
                if fk["referred_table"] == "resource_classes"]


def _allocation_rows(engine) -> list[tuple]:
    a = t.allocations
    with engine.connect() as conn:
        return sorted(conn.execute(select(a.c.consumer_id, a.c.resource_provider_id, a.c.resource_class_id,
                                          a.c.used)).all())


def test_upgrade_drops_the_key_and_keeps_every_allocation(client, engine, create_provider):
    assert client.put("/resource_classes/CUSTOM_FPGA", mv="1.7").status == 201
    rp = create_provider("h1")["uuid"]
    set_inventory(client, rp, {"VCPU": 8, "CUSTOM_FPGA": 2})
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 3, "CUSTOM_FPGA": 1}}).status == 204
    before = _allocation_rows(engine)

    migrate.HISTORY.downgrade(engine, "0004")
    assert len(_class_keys(engine)) == 1
    assert _allocation_rows(engine) == before
    migrate.upgrade(engine)
    assert _class_keys(engine) == []
    assert _allocation_rows(engine) == before
    # and the upgraded table takes claims as before
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 5, "CUSTOM_FPGA": 1}}).status == 204
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 1}}).status == 409  # full


def test_what_the_key_guarded_still_holds(client, engine, create_provider):
    """No allocation of a class without inventory, of an unknown class, or
    left behind by a deleted class."""
    assert client.put("/resource_classes/CUSTOM_FPGA", mv="1.7").status == 201
    assert client.put("/resource_classes/CUSTOM_SPARE", mv="1.7").status == 201
    rp = create_provider("h1")["uuid"]
    set_inventory(client, rp, {"VCPU": 8, "CUSTOM_FPGA": 2})

    no_inventory = put_allocations(client, new_uuid(), {rp: {"CUSTOM_SPARE": 1}})
    assert no_inventory.status == 409, no_inventory
    unknown = put_allocations(client, new_uuid(), {rp: {"CUSTOM_NOPE": 1}})
    assert unknown.status == 400, unknown

    assert put_allocations(client, new_uuid(), {rp: {"CUSTOM_FPGA": 1}}).status == 204
    in_use = client.delete("/resource_classes/CUSTOM_FPGA", mv="1.7")
    assert in_use.status == 409, in_use
    # The class's inventory cannot go either while it is allocated.
    assert client.delete(f"/resource_providers/{rp}/inventories/CUSTOM_FPGA", mv="1.7").status == 409

    a, rc = t.allocations, t.resource_classes
    with engine.connect() as conn:
        orphans = conn.execute(select(func.count()).select_from(a.outerjoin(rc, rc.c.id == a.c.resource_class_id))
                               .where(rc.c.id.is_(None))).scalar()
    assert orphans == 0
    assert client.delete("/resource_classes/CUSTOM_SPARE", mv="1.7").status == 204
