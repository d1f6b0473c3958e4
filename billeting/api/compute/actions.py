"""``POST /servers/{id}/action`` (moves, handed to the injected ``MoveTasks``;
the lifecycle actions, see ``lifecycle_actions``) and
``/servers/{id}/os-instance-actions``."""
from __future__ import annotations

import falcon

from billeting.api.compute import action_events, lifecycle_actions, paging, schemas, server_locks, views
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request, conflict, not_found
from billeting.api.compute.lookup import find
from billeting.api.compute.servers import base_url, ref_id, server_body
from billeting.api.compute.flavors import visible as visible_flavor
from billeting.apidb import instance_actions
from billeting.apidb.aggregates import utcnow
from billeting.apidb.cell_mappings import CELL0
from billeting.cells import instances as inst
from billeting.cells import moves as migrations
from billeting.conductor.move_protocols import MoveRefused

# body key → (instance action name, policy rule, status on success)
_ACTIONS = {
    "migrate": ("migrate", "os_compute_api:os-migrate-server:migrate", 202),
    "resize": ("resize", "os_compute_api:servers:resize", 202),
    "confirmResize": ("confirmResize", "os_compute_api:servers:confirm_resize", 204),
    "revertResize": ("revertResize", "os_compute_api:servers:revert_resize", 202),
    "os-migrateLive": ("live-migration", "os_compute_api:os-migrate-server:migrate_live", 202),
    "evacuate": ("evacuate", "os_compute_api:os-evacuate", 200),
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
        if key not in _ACTIONS and key not in lifecycle_actions.ACTIONS:
            raise bad_request(f"There is no such action: {key}")
        if args is not None and not isinstance(args, dict):
            raise bad_request(f"Invalid input for field/attribute {key}. Value: {args}.")
        if key in lifecycle_actions.ACTIONS:
            self._lifecycle(req, resp, ctx, key, args, server_id)
            return
        action, rule, status = _ACTIONS[key]
        args = args or {}
        _check_args(key, args, ctx)
        # As Nova: another project's server is not found; then the policy
        # decides on what the server's project may do.
        found = find(self.deps, ctx, server_id)
        ctx.authorize(rule, found.mapping.project_id)
        if found.record is None:
            raise conflict(f"Cannot '{key}' instance {server_id} while it is in vm_state building")
        server_locks.check(found, ctx, key)
        uuid = found.mapping.instance_uuid
        if self.deps.moves is None:
            raise conflict(f"Cannot '{key}' instance {server_id}: moves are not available in this deployment.")

        started = utcnow()

        def remember(**kw) -> None:
            instance_actions.record(self.deps.api_engine, instance_uuid=uuid, action=action, start_time=started,
                                    request_id=ctx.request_id, project_id=ctx.project_id, user_id=ctx.user_id, **kw)

        # Like Nova, a request refused up front (bad flavor, wrong state) leaves
        # no action; one the scheduler could not place leaves a failed one.
        try:
            self._run(ctx, key, uuid, args, action_events.migration_uuid(ctx.request_id, uuid))
        except MoveRefused as exc:
            if exc.message.startswith("No valid host"):
                remember(message="Error", finished=True)
            raise NovaError(exc.status if exc.status in (400, 403, 404, 409) else 400, exc.message) from None
        resp.status = status
        # confirm and revert are done while the request waits; the moves
        # finish later and their result is read from the cell (action_events).
        remember(finished=key in ("confirmResize", "revertResize"))
        if key == "evacuate" and not ctx.version.at_least(14):
            resp.media = {"adminPass": None}

    def _lifecycle(self, req, resp, ctx: RequestContext, key: str, args, server_id: str) -> None:
        action, rule = lifecycle_actions.ACTIONS[key]
        args = lifecycle_actions.check(key, args, ctx)
        found = find(self.deps, ctx, server_id)
        ctx.authorize(rule, found.mapping.project_id)
        if found.record is None:
            raise conflict(f"Cannot '{key}' instance {server_id} while it is in vm_state building")
        server_locks.check(found, ctx, key)
        if self.deps.lifecycle is None:
            raise conflict(f"Cannot '{key}' instance {server_id}: lifecycle actions are not available in this "
                           "deployment.")
        started = utcnow()

        def remember(**kw) -> None:
            instance_actions.record(self.deps.api_engine, instance_uuid=found.mapping.instance_uuid, action=action,
                                    start_time=started, request_id=ctx.request_id, project_id=ctx.project_id,
                                    user_id=ctx.user_id, **kw)

        try:
            done = lifecycle_actions.run(self.deps, ctx, key, found, args,
                                         server_view=lambda f: server_body(self.deps, ctx, f, base_url(req)))
        except MoveRefused as exc:
            if exc.message.startswith("No valid host"):
                remember(message="Error", finished=True)
            raise NovaError(exc.status if exc.status in (400, 403, 404, 409) else 400, exc.message) from None
        remember(finished=done.finished)
        resp.status = falcon.HTTP_202
        if done.body is not None:
            resp.media = done.body

    def _run(self, ctx: RequestContext, key: str, uuid: str, args: dict, migration_uuid: str) -> None:
        moves = self.deps.moves
        if key == "migrate":
            moves.resize(uuid, host=_host(args.get("host")), migration_uuid=migration_uuid)
        elif key == "resize":
            if "flavorRef" not in args:
                raise bad_request("Invalid input for field/attribute resize. Value: flavorRef is required.")
            flavor = visible_flavor(self.deps, ctx, ref_id(args["flavorRef"]))
            if flavor is None:
                raise bad_request(f"Flavor {ref_id(args['flavorRef'])} could not be found.")
            moves.resize(uuid, flavor=flavor.scheduler_flavor(), migration_uuid=migration_uuid)
        elif key == "confirmResize":
            moves.confirm_resize(uuid)
        elif key == "revertResize":
            moves.revert_resize(uuid)
        elif key == "os-migrateLive":
            moves.live_migrate(uuid, host=_host(args.get("host")), migration_uuid=migration_uuid)
        elif key == "evacuate":
            moves.evacuate(uuid, host=_host(args.get("host")), migration_uuid=migration_uuid)


def _check_args(key: str, args: dict, ctx: RequestContext) -> None:
    """The body shapes Nova's schemas accept for the microversion (the
    fields this deployment has no use for are accepted and ignored)."""
    if key == "os-migrateLive":
        if "host" not in args:
            raise bad_request("Invalid input for field/attribute os-migrateLive. Value: host is a required "
                              "property.")
        block = args.get("block_migration")
        allowed = (True, False, "auto") if ctx.version.at_least(25) else (True, False, "True", "False", "true",
                                                                             "false")
        if block not in allowed:
            raise bad_request(f"Invalid input for field/attribute block_migration. Value: {block}.")
        if ctx.version.at_least(25) and "disk_over_commit" in args:
            raise bad_request("Invalid input for field/attribute os-migrateLive. Additional properties are not "
                              "allowed ('disk_over_commit' was unexpected)")
        if not ctx.version.at_least(25) and "disk_over_commit" not in args:
            raise bad_request("Invalid input for field/attribute os-migrateLive. Value: disk_over_commit is a "
                              "required property.")
    if key == "evacuate" and not ctx.version.at_least(14) and "onSharedStorage" not in args:
        raise bad_request("Invalid input for field/attribute evacuate. Value: onSharedStorage is a required "
                          "property.")
    if key == "evacuate" and ctx.version.at_least(14) and "onSharedStorage" in args:
        raise bad_request("Invalid input for field/attribute evacuate. Additional properties are not allowed "
                          "('onSharedStorage' was unexpected)")
    if key == "migrate" and "host" in args and not ctx.version.at_least(56):
        raise bad_request("Invalid input for field/attribute migrate. Additional properties are not allowed "
                          "('host' was unexpected)")
    if key in ("os-migrateLive", "evacuate") and "force" in args and ctx.version.at_least(68):
        raise bad_request(f"Invalid input for field/attribute {key}. Additional properties are not allowed "
                          "('force' was unexpected)")


def _event_view(e: action_events.Event, ctx: RequestContext, project_id: str) -> dict:
    body = {"event": e.event, "start_time": views.iso_micro(e.start_time),
            "finish_time": views.iso_micro(e.finish_time), "result": e.result}
    if ctx.is_admin or not ctx.version.at_least(51):
        body["traceback"] = None
    if ctx.version.at_least(62):
        if ctx.is_admin:
            body["host"] = e.host or ""
        body["hostId"] = views.host_id(project_id, e.host)
    if ctx.version.at_least(84):
        body["details"] = None
    return body


def _action_view(a: instance_actions.InstanceAction, ctx: RequestContext,
                 outcome: action_events.Outcome | None = None) -> dict:
    finish = outcome.finish_time if outcome is not None else a.finish_time
    message = outcome.message if outcome is not None else a.message
    body = {"action": a.action, "instance_uuid": a.instance_uuid, "message": message,
            "project_id": a.project_id, "request_id": a.request_id, "start_time": views.iso_micro(a.start_time),
            "user_id": a.user_id}
    if ctx.version.at_least(58):
        body["updated_at"] = views.iso_micro(finish or a.start_time)
    return body


def _changed_between(bodies: list[dict], params, ctx: RequestContext) -> list[dict]:
    """The actions last updated in ``[changes-since, changes-before]`` (2.58,
    2.66), by the ``updated_at`` each body shows."""
    since, before = paging.time_window(params, changes_before=ctx.version.at_least(66))
    if since is None and before is None:
        return bodies
    return [b for b in bodies if paging.in_window(b["updated_at"], since, before)]


class InstanceActions:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def _outcomes(self, found, actions: list[instance_actions.InstanceAction]) -> list[action_events.Outcome]:
        """Each action's result, derived from the cell (see action_events); a
        final result not yet in the API database is written there."""
        engine = self.deps.cells.engine_of(found.cell) if found.cell else None
        record = found.record
        found_migrations = {}
        wanted = [action_events.migration_uuid(a.request_id, a.instance_uuid) for a in actions
                  if action_events.is_move(a.action)]
        if wanted and engine is not None:
            found_migrations = {m.uuid: m for m in migrations.listing(engine, instance_uuids=[
                found.mapping.instance_uuid]) if m.uuid in wanted}
        fault = None
        if engine is not None and record is not None and any(action_events.needs_fault(a) for a in actions):
            fault = inst.latest_fault(engine, found.mapping.instance_uuid)
        outcomes = []
        for a in actions:
            migration = found_migrations.get(action_events.migration_uuid(a.request_id, a.instance_uuid))
            done = action_events.outcome(a, record, migration, in_cell0=found.cell == CELL0, fault=fault)
            if a.finish_time is None and done.final:
                instance_actions.close(self.deps.api_engine, a.id, finish_time=done.finish_time,
                                       message=done.message)
            outcomes.append(done)
        return outcomes

    def on_get(self, req, resp, server_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = find(self.deps, ctx, server_id, include_deleted=True)
        ctx.authorize("os_compute_api:os-instance-actions:list", found.mapping.project_id)
        listed = instance_actions.listing(self.deps.api_engine, found.mapping.instance_uuid)
        bodies = [_action_view(a, ctx, o) for a, o in zip(listed, self._outcomes(found, listed))]
        if not ctx.version.at_least(58):  # before 2.58 the listing takes no query
            resp.media = {"instanceActions": bodies}
            return
        bodies = _changed_between(bodies, req.params, ctx)
        page, links = paging.page(bodies, req, f"servers/{server_id}/os-instance-actions",
                                  lambda b: b["request_id"],
                                  missing=f"Marker {req.params.get('marker')} could not be found.")
        resp.media = {"instanceActions": page, **({"links": links} if links else {})}

    def on_get_one(self, req, resp, server_id: str, request_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = find(self.deps, ctx, server_id, include_deleted=True)
        ctx.authorize("os_compute_api:os-instance-actions:show", found.mapping.project_id)
        action = instance_actions.by_request(self.deps.api_engine, found.mapping.instance_uuid, request_id)
        if action is None:
            raise not_found(f"Action for request_id {request_id} on instance {server_id} not found")
        outcome, = self._outcomes(found, [action])
        body = _action_view(action, ctx, outcome)
        if ctx.is_admin or ctx.version.at_least(51):
            body["events"] = [_event_view(e, ctx, action.project_id) for e in outcome.events]
        resp.media = {"instanceAction": body}


__all__ = ["ServerAction", "InstanceActions", "falcon"]
