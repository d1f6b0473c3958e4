"""What a delete must free besides the instance's own allocation: the
source allocation held by a migration that is still in progress (a server
deleted in VERIFY_RESIZE, or mid-move). Used by every delete path — the
compute's and the cell conductor's (compute down)."""
from __future__ import annotations

import logging

from sqlalchemy import Engine

from billeting.cells import moves as migrations
from billeting.cells.audit import MIGRATION_DONE
from billeting.placement_client.client import PlacementClient

LOG = logging.getLogger(__name__)

CANCELLED = "cancelled"


def free_migrations(engine: Engine, client: PlacementClient, instance_uuid: str) -> list[migrations.MigrationRecord]:
    """Force-delete the allocations of every unfinished migration of the
    instance and mark it cancelled; the migrations freed. Raises
    PlacementError (the caller's sweep retries the delete)."""
    freed = []
    for m in migrations.for_instance(engine, instance_uuid):
        if m.status in MIGRATION_DONE:
            continue
        if client.delete_allocations(m.uuid):
            LOG.info("delete of %s freed the allocations of its migration %s (%s)", instance_uuid, m.uuid,
                     m.status)
        migrations.set_status(engine, m.uuid, CANCELLED, expect=m.status)
        freed.append(m)
    return freed
