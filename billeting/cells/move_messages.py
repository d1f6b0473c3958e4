"""The casts of moves on a cell's bus (the build casts live in ``messages``).

    compute.<dest>    prep_resize        ResizeInstance   conductor → destination (cold migrate, resize)
    compute.<dest>    live_migration     LiveMigrate      conductor → destination
    compute.<dest>    rebuild_instance   RebuildInstance  conductor → destination (evacuate)
    compute.<host>    drop_guest         DropGuest        remove a guest the instance left behind
                                                          (source after confirm, destination after revert)
    compute.<source>  restore_guest      RestoreGuest     revert: make sure the source runs the guest

A move is named by its migration uuid: handlers compare the message with
the migration record and the instance's task state and drop a message that
is no longer current, so a redelivered cast is harmless.
"""
from __future__ import annotations

import msgspec

from billeting import typeinfo
from billeting.scheduler.nova import Flavor
from billeting.scheduler.selection import Selection


class ResizeInstance(msgspec.Struct, frozen=True, kw_only=True):
    """Build the instance on ``selection`` (already the instance's allocation
    in Placement; the source is held by the migration) with ``flavor``."""

    instance_uuid: str
    migration_uuid: str
    selection: Selection
    flavor: Flavor


class LiveMigrate(msgspec.Struct, frozen=True, kw_only=True):
    instance_uuid: str
    migration_uuid: str
    selection: Selection
    source_host: str


class RebuildInstance(msgspec.Struct, frozen=True, kw_only=True):
    """Evacuate: the instance holds the source and ``selection`` (doubled)."""

    instance_uuid: str
    migration_uuid: str
    selection: Selection
    source_host: str


class DropGuest(msgspec.Struct, frozen=True):
    instance_uuid: str
    migration_uuid: str


class RestoreGuest(msgspec.Struct, frozen=True):
    instance_uuid: str
    migration_uuid: str


encode = msgspec.json.Encoder().encode
decode_resize = typeinfo.decoder(ResizeInstance).decode
decode_live = typeinfo.decoder(LiveMigrate).decode
decode_rebuild = typeinfo.decoder(RebuildInstance).decode
decode_drop = typeinfo.decoder(DropGuest).decode
decode_restore = typeinfo.decoder(RestoreGuest).decode


class ComputeMovesAPI:
    """Typed senders for the casts above, on one cell's bus."""

    def __init__(self, bus) -> None:
        self.bus = bus

    def _cast(self, host: str, method: str, message) -> None:
        from billeting.cells.messages import COMPUTE_TOPIC

        self.bus.cast(COMPUTE_TOPIC, method, encode(message), server=host)

    def prep_resize(self, host: str, message: ResizeInstance) -> None:
        self._cast(host, "prep_resize", message)

    def live_migration(self, host: str, message: LiveMigrate) -> None:
        self._cast(host, "live_migration", message)

    def rebuild_instance(self, host: str, message: RebuildInstance) -> None:
        self._cast(host, "rebuild_instance", message)

    def drop_guest(self, host: str, instance_uuid: str, migration_uuid: str) -> None:
        self._cast(host, "drop_guest", DropGuest(instance_uuid, migration_uuid))

    def restore_guest(self, host: str, instance_uuid: str, migration_uuid: str) -> None:
        self._cast(host, "restore_guest", RestoreGuest(instance_uuid, migration_uuid))
