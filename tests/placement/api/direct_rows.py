"""Write rows straight into the store, for tests that need state whose API
belongs to another module (allocations, aggregates, traits)."""
from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import select

from billeting.placement import allocations
from billeting.placement.store import tables as t


def provider_id(conn, rp_uuid: str) -> int:
    return conn.execute(select(t.resource_providers.c.id)
                        .where(t.resource_providers.c.uuid == rp_uuid)).scalar_one()


def allocate(engine, rp_uuid: str, rc: str, used: int) -> str:
    """Give the provider one allocation of a new consumer; returns the consumer uuid."""
    consumer_uuid = str(uuidlib.uuid4())
    tag = consumer_uuid.replace("-", "")
    with engine.begin() as conn:
        rc_id = conn.execute(select(t.resource_classes.c.id)
                             .where(t.resource_classes.c.name == rc)).scalar_one()
        project = conn.execute(t.projects.insert().values(external_id=f"p-{tag}")).inserted_primary_key[0]
        user = conn.execute(t.users.insert().values(external_id=f"u-{tag}")).inserted_primary_key[0]
        consumer = conn.execute(t.consumers.insert().values(
            uuid=consumer_uuid, project_id=project, user_id=user, generation=1)).inserted_primary_key[0]
        rp_id = provider_id(conn, rp_uuid)
        conn.execute(t.allocations.insert().values(
            resource_provider_id=rp_id, consumer_id=consumer, resource_class_id=rc_id, used=used))
        # As Placement's own writes do: the inventory row keeps the usage.
        allocations.count_usage(conn, {(rp_id, rc_id): used})
    return consumer_uuid


def add_aggregates(engine, rp_uuid: str, *aggregate_uuids: str) -> None:
    with engine.begin() as conn:
        rp_id = provider_id(conn, rp_uuid)
        for agg in aggregate_uuids:
            agg_id = conn.execute(select(t.placement_aggregates.c.id)
                                  .where(t.placement_aggregates.c.uuid == agg)).scalar()
            if agg_id is None:
                agg_id = conn.execute(t.placement_aggregates.insert().values(uuid=agg)).inserted_primary_key[0]
            conn.execute(t.resource_provider_aggregates.insert().values(
                resource_provider_id=rp_id, aggregate_id=agg_id))


def add_traits(engine, rp_uuid: str, *names: str) -> None:
    """Associate existing (standard or already created) traits."""
    with engine.begin() as conn:
        rp_id = provider_id(conn, rp_uuid)
        for name in names:
            trait_id = conn.execute(select(t.traits.c.id).where(t.traits.c.name == name)).scalar_one()
            conn.execute(t.resource_provider_traits.insert().values(
                resource_provider_id=rp_id, trait_id=trait_id))

