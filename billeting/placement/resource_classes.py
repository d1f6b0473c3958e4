"""Resource classes: the standard ones synced from os-resource-classes and
custom ``CUSTOM_*`` ones created through the API (docs/design/placement-model.md#resource-classes,
docs/design/placement-endpoints.md#resource-classes).

Standard classes keep their library index as id; custom ones are numbered
from ``CUSTOM_RC_START_ID`` upward, so "standard" is simply ``id`` below it.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, update
from sqlalchemy.exc import IntegrityError

from billeting.placement import errors
from billeting.placement.providers import utcnow
from billeting.placement.store import tables as t
from billeting.placement.store.tx import Retry
from billeting.placement.store.upsert import insert_ignoring_duplicates

_rc = t.resource_classes

CUSTOM_PATTERN = "^CUSTOM_[A-Z0-9_]+$"
MAX_NAME_LENGTH = 255
# fullmatch, because "$" in a schema pattern also accepts a trailing newline.
_CUSTOM_RE = re.compile(r"CUSTOM_[A-Z0-9_]+")


@dataclass(slots=True)
class ResourceClass:
    id: int
    name: str
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def is_standard(self) -> bool:
        return self.id < t.CUSTOM_RC_START_ID

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


def is_custom_name(name: str) -> bool:
    return len(name) <= MAX_NAME_LENGTH and _CUSTOM_RE.fullmatch(name) is not None



def _from_row(row) -> ResourceClass:
    return ResourceClass(id=row.id, name=row.name, created_at=row.created_at, updated_at=row.updated_at)


def _could_exist(name: str) -> bool:
    # Such a name can never have been stored; PostgreSQL would also reject
    # a NUL byte in a query parameter outright.
    return len(name) <= MAX_NAME_LENGTH and "\x00" not in name


def list_all(conn: Connection) -> list[ResourceClass]:
    return [_from_row(r) for r in conn.execute(select(_rc).order_by(_rc.c.id))]


def get(conn: Connection, name: str) -> ResourceClass | None:
    if not _could_exist(name):
        return None
    row = conn.execute(select(_rc).where(_rc.c.name == name)).first()
    return _from_row(row) if row else None


def require(conn: Connection, name: str) -> ResourceClass:
    found = get(conn, name)
    if found is None:
        raise errors.NotFound(f"No such resource class {name}.")
    return found


def _next_custom_id(conn: Connection) -> int:
    highest = conn.execute(select(func.max(_rc.c.id))).scalar()
    return max((highest or 0) + 1, t.CUSTOM_RC_START_ID)


def ensure(conn: Connection, name: str) -> tuple[ResourceClass, bool]:
    """Create the custom class ``name`` unless it exists; ``(class, created)``.

    Two creators may pick the same next id. The insert skips duplicates
    instead of failing, so the loser can tell the cases apart: the name now
    exists (somebody created the same class: fine) or only the id was taken
    (re-run the transaction to pick a fresh id).
    """
    existing = get(conn, name)
    if existing is not None:
        return existing, False
    new_id = _next_custom_id(conn)
    inserted = insert_ignoring_duplicates(
        conn, _rc, [{"id": new_id, "name": name, "created_at": utcnow()}])
    if inserted == 1:
        return require(conn, name), True
    existing = get(conn, name)
    if existing is not None:
        return existing, False
    raise Retry(f"resource class id {new_id} was taken concurrently")


def create(conn: Connection, name: str) -> ResourceClass:
    """POST semantics: an existing name is a conflict."""
    created_class, created = ensure(conn, name)
    if not created:
        raise errors.Conflict(f"Conflicting resource class already exists: {name}")
    return created_class


def rename(conn: Connection, name: str, new_name: str) -> ResourceClass:
    """The deprecated rename of ``PUT /resource_classes/{name}`` (mv 1.2–1.6)."""
    current = require(conn, name)
    if current.is_standard:
        raise errors.InvalidInput(f"Cannot update standard resource class {name}")
    if get(conn, new_name) is not None:
        raise errors.Conflict(f"Resource class already exists: {new_name}")
    try:
        conn.execute(update(_rc).where(_rc.c.id == current.id)
                     .values(name=new_name, updated_at=utcnow()))
    except IntegrityError:
        # Somebody created ``new_name`` between our check and the update.
        raise errors.Conflict(f"Resource class already exists: {new_name}") from None
    return require(conn, new_name)


def _in_use(conn: Connection, rc_id: int) -> bool:
    for table in (t.inventories, t.allocations):
        if conn.execute(select(table.c.id).where(table.c.resource_class_id == rc_id).limit(1)).first():
            return True
    return False


def delete(conn: Connection, name: str) -> None:
    current = require(conn, name)
    if current.is_standard:
        raise errors.InvalidInput(
            f"Error in delete resource class: Cannot delete standard resource class {name}.")
    in_use = errors.Conflict(
        f"Error in delete resource class: Cannot delete resource class {name}. "
        "Class is in use in inventory.")
    if _in_use(conn, current.id):
        raise in_use
    try:
        conn.execute(_rc.delete().where(_rc.c.id == current.id))
    except IntegrityError:
        # An inventory of this class was added after the check above.
        raise in_use from None
