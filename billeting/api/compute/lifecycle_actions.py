"""The lifecycle actions of ``POST /servers/{id}/action`` (os-stop, os-start,
shelve, shelveOffload, unshelve, rebuild, lock, unlock): their bodies as
Nova's schemas accept them per microversion, and the call into the
injected ``LifecycleTasks`` (billeting.conductor.lifecycle).

``actions.ServerAction`` owns what every action shares (lookup, policy,
instance action records); this module only knows these eight.
"""
from __future__ import annotations

import dataclasses
import uuid as uuidlib

from billeting.api.compute import availability_zones
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import bad_request
from billeting.api.compute.lookup import Found
from billeting.apidb import images
from billeting.cells import lifecycle_states

# body key → (instance action name, policy rule)
ACTIONS = {
    "os-stop": ("stop", "os_compute_api:servers:stop"),
    "os-start": ("start", "os_compute_api:servers:start"),
    "shelve": ("shelve", "os_compute_api:os-shelve:shelve"),
    "shelveOffload": ("shelveOffload", "os_compute_api:os-shelve:shelve_offload"),
    "unshelve": ("unshelve", "os_compute_api:os-shelve:unshelve"),
    "rebuild": ("rebuild", "os_compute_api:servers:rebuild"),
    "lock": ("lock", "os_compute_api:os-lock-server:lock"),
    "unlock": ("unlock", "os_compute_api:os-lock-server:unlock"),
}
UNSHELVE_TO_HOST = "os_compute_api:os-shelve:unshelve_to_host"
UNLOCK_OVERRIDE = "os_compute_api:os-lock-server:unlock:unlock_override"

_REBUILD_KEYS = {"imageRef", "name", "adminPass", "metadata", "preserve_ephemeral", "OS-DCF:diskConfig",
                 "accessIPv4", "accessIPv6"}
# key → the microversion (minor) that adds it to the rebuild body; None: removed at that one
_REBUILD_BY_VERSION = {"description": 19, "key_name": 54, "user_data": 57, "trusted_image_certificates": 63,
                       "hostname": 90}


@dataclasses.dataclass(frozen=True)
class Done:
    """What the action left: the instance action is finished now (``finished``)
    or later, from the cell (rebuild, an offloaded server's unshelve)."""

    finished: bool
    body: dict | None = None


def _invalid(key: str, detail: str):
    return bad_request(f"Invalid input for field/attribute {key}. Value: {detail}.")


def _extra(key: str, name: str):
    return bad_request(f"Invalid input for field/attribute {key}. Additional properties are not allowed "
                       f"('{name}' was unexpected)")


def _string(key: str, value, *, max_len: int = 255, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > max_len:
        raise _invalid(key, str(value)[:80])
    return value


def check(key: str, args, ctx: RequestContext) -> dict:
    """The action's arguments as a dict, or a 400 in Nova's words."""
    if key == "unshelve":
        return _unshelve_args(args, ctx)
    if key == "rebuild":
        return _rebuild_args(args, ctx)
    if key == "lock" and ctx.version.at_least(73):
        if args is None:
            return {}
        if not isinstance(args, dict):
            raise _invalid("lock", str(args)[:80])
        for name in args:
            if name != "locked_reason":
                raise _extra("lock", name)
        if "locked_reason" in args:
            return {"locked_reason": _string("locked_reason", args["locked_reason"])}
        return {}
    # os-stop, os-start, shelve, shelveOffload, unlock (and lock before 2.73)
    # take no arguments; Nova ignores what a client sends with them.
    return {}


def _unshelve_args(args, ctx: RequestContext) -> dict:
    if args is None or not ctx.version.at_least(77):
        return {}  # (before 2.77 the body's value is not read)
    if not isinstance(args, dict):
        raise _invalid("unshelve", str(args)[:80])
    allowed = ("availability_zone", "host") if ctx.version.at_least(91) else ("availability_zone",)
    for name in args:
        if name not in allowed:
            raise _extra("unshelve", name)
    out: dict = {}
    if ctx.version.at_least(91):
        if not args:
            raise _invalid("unshelve", "{} does not have enough properties")
        if "availability_zone" in args:
            out["availability_zone"] = _string("availability_zone", args["availability_zone"], nullable=True)
        if "host" in args:
            out["host"] = _string("host", args["host"])
        return out
    if "availability_zone" not in args:
        raise _invalid("unshelve", "'availability_zone' is a required property")
    out["availability_zone"] = _string("availability_zone", args["availability_zone"])
    return out


def _rebuild_args(args, ctx: RequestContext) -> dict:
    if not isinstance(args, dict):
        raise _invalid("rebuild", str(args)[:80])
    allowed = set(_REBUILD_KEYS)
    allowed |= {k for k, minor in _REBUILD_BY_VERSION.items() if ctx.version.at_least(minor)}
    if not ctx.version.at_least(57):
        allowed.add("personality")
    for name in args:
        if name not in allowed:
            raise _extra("rebuild", name)
    if "imageRef" not in args:
        raise _invalid("rebuild", "'imageRef' is a required property")
    image_ref = args["imageRef"]
    if not isinstance(image_ref, str) or not image_ref.strip():
        raise _invalid("imageRef", str(image_ref)[:80])
    if "name" in args:
        _string("name", args["name"])
    if "adminPass" in args and not isinstance(args["adminPass"], str):
        raise _invalid("adminPass", str(args["adminPass"])[:80])
    if "preserve_ephemeral" in args and not isinstance(args["preserve_ephemeral"], bool):
        raise _invalid("preserve_ephemeral", str(args["preserve_ephemeral"])[:80])
    if "metadata" in args and not (isinstance(args["metadata"], dict)
                                   and all(isinstance(v, str) for v in args["metadata"].values())):
        raise _invalid("metadata", str(args["metadata"])[:80])
    return args


def run(deps: ComputeAPIDeps, ctx: RequestContext, key: str, found: Found, args: dict, *,
        server_view) -> Done:
    """Carry the action out (MoveRefused on refusal). ``server_view``: the
    server's body for the rebuild answer (the API's show view)."""
    tasks = deps.lifecycle
    uuid = found.mapping.instance_uuid
    if key == "os-stop":
        tasks.stop(uuid)
    elif key == "os-start":
        tasks.start(uuid)
    elif key == "shelve":
        tasks.shelve(uuid)
    elif key == "shelveOffload":
        tasks.shelve_offload(uuid)
    elif key == "unshelve":
        return _unshelve(deps, ctx, found, args)
    elif key == "rebuild":
        return _rebuild(deps, ctx, found, args, server_view)
    elif key == "lock":
        by = lifecycle_states.LOCKED_BY_OWNER if found.mapping.project_id == ctx.project_id \
            else lifecycle_states.LOCKED_BY_ADMIN
        tasks.lock(uuid, by=by, reason=args.get("locked_reason"))
    elif key == "unlock":
        record = found.record
        if record is not None and record.locked_by == lifecycle_states.LOCKED_BY_ADMIN \
                and found.mapping.project_id == ctx.project_id and not ctx.is_admin:
            # The owner may not lift an admin's lock unless the policy says so.
            ctx.authorize(UNLOCK_OVERRIDE, found.mapping.project_id)
        tasks.unlock(uuid)
    return Done(finished=True)


def _unshelve(deps: ComputeAPIDeps, ctx: RequestContext, found: Found, args: dict) -> Done:
    from billeting.conductor.lifecycle import KEEP_ZONE

    host = args.get("host")
    if host is not None:
        ctx.authorize(UNSHELVE_TO_HOST, found.mapping.project_id)
        if not any(r.service_host == host for r in deps.scheduler.catalog.by_name(host)):
            raise bad_request(f"Compute host {host} could not be found.")
    zone = args.get("availability_zone", KEEP_ZONE)
    if isinstance(zone, str) and zone not in availability_zones.zone_names(deps):
        raise bad_request("The requested availability zone is not available")
    offloaded = found.record is not None and found.record.vm_state.value == "shelved_offloaded"
    deps.lifecycle.unshelve(found.mapping.instance_uuid, availability_zone=zone, host=host)
    return Done(finished=not offloaded)


def _rebuild(deps: ComputeAPIDeps, ctx: RequestContext, found: Found, args: dict, server_view) -> Done:
    from billeting.api.compute.servers import ref_id

    image_id = ref_id(args["imageRef"])
    stored = images.get(deps.api_engine, image_id)
    if stored is None:
        raise bad_request(f"Image {image_id} could not be found.")
    record = deps.lifecycle.rebuild(found.mapping.instance_uuid, image=stored.scheduler_image(),
                                    name=args.get("name"))
    # Nova answers with the server (its show view) and the new admin password.
    body = {**server_view(dataclasses.replace(found, record=record)),
            "adminPass": args.get("adminPass") or uuidlib.uuid4().hex[:12]}
    return Done(finished=False, body={"server": body})
