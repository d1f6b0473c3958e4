"""A locked server (``lock``, ``unlock``) refuses actions from non-admins,
as Nova does: 409 "Instance ... is locked". Admins act on it anyway."""
from __future__ import annotations

from billeting.api.compute.context import RequestContext
from billeting.api.compute.errors import NovaError, conflict
from billeting.api.compute.lookup import Found

# Actions a locked server still takes from anyone allowed to call them.
LOCK_FREE = ("lock", "unlock")


def locked(uuid: str) -> NovaError:
    return conflict(f"Instance {uuid} is locked")


def check(found: Found, ctx: RequestContext, action: str) -> None:
    record = found.record
    if record is not None and record.locked_by is not None and action not in LOCK_FREE and not ctx.is_admin:
        raise locked(record.uuid)
