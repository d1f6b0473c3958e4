"""``POST /servers/{id}/action`` (moves, handed to the injected ``MoveTasks``)
and ``/servers/{id}/os-instance-actions``."""
from __future__ import annotations

import falcon

from billeting.api.compute import schemas, views
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request, conflict, not_found
from billeting.api.compute.lookup import find
from billeting.api.compute.servers import ref_id
from billeting.apidb import flavors, instance_actions
from billeting.conductor.move_protocols import MoveRefused

# body key → (instance action name, admin only, status on success)
_ACTIONS = {
    "migrate": ("migrate", True, 202),
    "resize": ("resize", False, 202),
    "confirmResize": ("confirmResize", False, 204),
    "revertResize": ("revertResize", False, 202),
    "os-migrateLive": ("live-migration", True, 202),
    "evacuate": ("evacuate", True, 200),
}


def _host(value) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255:
        raise bad_request(f"Invalid input for field/attribute host. Value: {value}.")
    return value


class ServerAction:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_post(self, req, resp, server_id: str) -> None:
        ctx: RequestContext = req.context.nova
        doc = schemas.body(req)
        if not isinstance(doc, dict) or len(doc) != 1:
            raise bad_request("Invalid request body: exactly one action is expected.")
        (key, args), = doc.items()
        if key not in _ACTIONS:
            raise bad_request(f"There is no such action: {key}")
        action, admin_only, status = _ACTIONS[key]
        if admin_only:
            ctx.require_admin()
        if args is not None and not isinstance(args, dict):
            raise bad_request(f"Invalid input for field/attribute {key}. Value: {args}.")
        args = args or {}
        found = find(self.deps, ctx, server_id)
        if found.record is None:
            raise conflict(f"Cannot '{key}' instance {server_id} while it is in vm_state building")
        uuid = found.mapping.instance_uuid
        if self.deps.moves is None:
            raise conflict(f"Cannot '{key}' instance {server_id}: moves are not available in this deployment.")
        instance_actions.record(self.deps.api_engine, instance_uuid=uuid, action=action, request_id=ctx.request_id,
                                project_id=ctx.project_id, user_id=ctx.user_id)
        try:
            self._run(key, uuid, args)
        except MoveRefused as exc:
            instance_actions.finish(self.deps.api_engine, uuid, action, message="Error")
            raise NovaError(exc.status if exc.status in (400, 403, 404, 409) else 400, exc.message) from None
        except NovaError:
            instance_actions.finish(self.deps.api_engine, uuid, action, message="Error")
            raise
        resp.status = status
        if key == "confirmResize":
            instance_actions.finish(self.deps.api_engine, uuid, action)
        if key == "evacuate" and not ctx.version.at_least(14):
            resp.media = {"adminPass": None}

    def _run(self, key: str, uuid: str, args: dict) -> None:
        moves = self.deps.moves
        if key == "migrate":
            moves.resize(uuid, host=_host(args.get("host")))
        elif key == "resize":
            if "flavorRef" not in args:
                raise bad_request("Invalid input for field/attribute resize. Value: flavorRef is required.")
            flavor = flavors.get(self.deps.api_engine, ref_id(args["flavorRef"]))
            if flavor is None:
                raise bad_request(f"Flavor {ref_id(args['flavorRef'])} could not be found.")
            moves.resize(uuid, flavor=flavor.scheduler_flavor())
        elif key == "confirmResize":
            moves.confirm_resize(uuid)
        elif key == "revertResize":
            moves.revert_resize(uuid)
        elif key == "os-migrateLive":
            moves.live_migrate(uuid, host=_host(args.get("host")))
        elif key == "evacuate":
            moves.evacuate(uuid, host=_host(args.get("host")))


def _action_view(a: instance_actions.InstanceAction, ctx: RequestContext) -> dict:
    body = {"action": a.action, "instance_uuid": a.instance_uuid, "message": a.message,
            "project_id": a.project_id, "request_id": a.request_id, "start_time": views.iso_micro(a.start_time),
            "user_id": a.user_id}
    if ctx.version.at_least(58):
        body["updated_at"] = views.iso_micro(a.finish_time or a.start_time)
    return body


class InstanceActions:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp, server_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = find(self.deps, ctx, server_id, include_deleted=True)
        resp.media = {"instanceActions": [_action_view(a, ctx) for a in instance_actions.listing(
            self.deps.api_engine, found.mapping.instance_uuid)]}

    def on_get_one(self, req, resp, server_id: str, request_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = find(self.deps, ctx, server_id, include_deleted=True)
        action = instance_actions.by_request(self.deps.api_engine, found.mapping.instance_uuid, request_id)
        if action is None:
            raise not_found(f"Action for request_id {request_id} on instance {server_id} not found")
        body = _action_view(action, ctx)
        body["events"] = []
        resp.media = {"instanceAction": body}


__all__ = ["ServerAction", "InstanceActions", "falcon"]
