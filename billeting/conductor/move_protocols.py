"""The contract between the compute API and the move tasks (resize, cold
and live migration, evacuate), so each side is built and tested alone.

The API layer owns the API database; it hands the move tasks two small
views of it (where an instance lives, and its stored request spec) and a
scheduler. The move tasks own everything after that: scheduling the
destination, the allocation swap in Placement, the migration record and
the casts to the computes of the instance's cell. Moves never cross cells.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

import msgspec

# The two records the API database keeps and the move tasks read live with
# that database (apidb sits below the conductor); named here as part of the
# contract.
from billeting.apidb.cell_directory import CellHandle
from billeting.apidb.request_specs import StoredRequestSpec
from billeting.scheduler.nova import Flavor


class CellDirectory(Protocol):
    def cells(self) -> Mapping[str, CellHandle]:
        """Every cell that can hold running instances (not cell0), by name."""

    def cell_of(self, instance_uuid: str) -> str | None:
        """The cell an instance is mapped to, or None when it has no mapping."""


class RequestSpecs(Protocol):
    def get(self, instance_uuid: str) -> StoredRequestSpec | None: ...

    def save(self, spec: StoredRequestSpec) -> None:
        """Replace the stored spec (after a confirmed resize: the new flavor)."""


class MoveKind(enum.StrEnum):
    MIGRATION = "migration"          # cold migrate: same flavor, another host
    RESIZE = "resize"
    LIVE_MIGRATION = "live-migration"
    EVACUATION = "evacuation"


class MoveAccepted(msgspec.Struct, frozen=True, kw_only=True):
    """A move that was scheduled and handed to its cell; it finishes asynchronously."""

    instance_uuid: str
    migration_uuid: str
    kind: MoveKind
    source_host: str
    dest_host: str


class MoveRefused(Exception):
    """The move cannot start. ``status`` is the HTTP status the API answers
    with (400 bad request or no valid host, 404 unknown instance, 409 the
    instance is in the wrong state or the compute is in the wrong state)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class MoveTasks(Protocol):
    def resize(self, instance_uuid: str, *, flavor: Flavor | None = None,
               host: str | None = None, migration_uuid: str | None = None) -> MoveAccepted:
        """Cold migrate (``flavor`` None) or resize; the instance ends in
        VERIFY_RESIZE with the source's allocations held by the migration.
        ``migration_uuid`` (every move takes one): the caller names the
        migration, so the API can find it again from the request that
        started it (instance action events); a new uuid when None."""

    def confirm_resize(self, instance_uuid: str) -> None:
        """Drop the source's allocations (held by the migration); ACTIVE on the destination."""

    def revert_resize(self, instance_uuid: str) -> None:
        """Give the instance its source allocations back; ACTIVE on the source."""

    def live_migrate(self, instance_uuid: str, *, host: str | None = None,
                     migration_uuid: str | None = None) -> MoveAccepted: ...

    def evacuate(self, instance_uuid: str, *, host: str | None = None,
                 migration_uuid: str | None = None) -> MoveAccepted:
        """Rebuild on another host when the instance's compute is down (409 when it is up)."""
