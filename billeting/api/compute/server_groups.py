"""``/os-server-groups`` over the scheduler's server groups (``scheduler.service.groups``)."""
from __future__ import annotations

import falcon

from billeting.api.compute import paging, schemas
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import bad_request, not_found
from billeting.apidb import server_groups as store
from billeting.apidb.server_groups import StoredGroup
from billeting.common.db.tx import run_read
from billeting.scheduler.errors import SchedulerError
from billeting.scheduler.request import HOST_SCOPE
from billeting.scheduler.service import groups


def view(group: StoredGroup, ctx: RequestContext) -> dict:
    body = {"id": group.uuid, "name": group.name, "members": list(group.members)}
    if ctx.version.at_least(64):
        body["policy"] = group.policy
        body["rules"] = ({"max_server_per_host": group.max_server_per_host}
                         if group.max_server_per_host is not None else {})
        if group.scope != HOST_SCOPE:  # (Billeting's rule: the policy holds per rack, row, ...)
            body["rules"]["scope"] = group.scope
    else:
        body["policies"] = [group.policy]
        body["metadata"] = {}
    if ctx.version.at_least(13):
        body["project_id"] = group.project_id
        body["user_id"] = group.user_id
    return body


class ServerGroups:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-server-groups:index")
        # As in Nova, a non-admin's all_projects is ignored (their own groups
        # are listed); an admin's is up to the policy.
        all_projects = ctx.is_admin and req.params.get("all_projects", "").lower() in ("true", "1", "yes")
        if all_projects:
            ctx.authorize("os_compute_api:os-server-groups:index:all_projects")
        found = run_read(self.deps.api_engine, lambda conn: store.list_groups(
            conn, project_id=None if all_projects else ctx.project_id))
        offset, limit = paging.count_of(req.params, "offset"), paging.limit_of(req.params)
        found = found[offset or 0:]
        if limit is not None:
            found = found[:limit]
        resp.media = {"server_groups": [view(g, ctx) for g in found]}

    def on_post(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        doc = schemas.body(req)
        schemas.check(doc, schemas.SERVER_GROUP_CREATE)
        ctx.authorize("os_compute_api:os-server-groups:create")
        sg = doc["server_group"]
        if ctx.version.at_least(64):
            if "policies" in sg or "policy" not in sg:
                raise bad_request("Invalid input for field/attribute server_group: 'policy' is required and "
                                  "'policies' is not allowed at microversion 2.64 or later.")
            policy = sg["policy"]
            rules = sg.get("rules") or {}
        else:
            if "policy" in sg or "rules" in sg or "policies" not in sg:
                raise bad_request("Invalid input for field/attribute server_group: 'policies' is required before "
                                  "microversion 2.64.")
            policy = sg["policies"][0]
            rules = {}
            if policy.startswith("soft") and not ctx.version.at_least(15):
                raise bad_request(f"Invalid input for field/attribute policies. Value: {policy}.")
        if "max_server_per_host" in rules and policy != "anti-affinity":
            raise bad_request("Invalid input for field/attribute rules: only the anti-affinity policy takes rules.")
        max_per_host = int(rules["max_server_per_host"]) if "max_server_per_host" in rules else None
        try:
            created = groups.create(self.deps.scheduler, groups.GroupSpec(
                name=sg["name"], policy=policy, project_id=ctx.project_id, user_id=ctx.user_id,
                max_server_per_host=max_per_host, scope=rules.get("scope", HOST_SCOPE)))
        except SchedulerError as exc:
            raise bad_request(exc.detail) from None
        stored = groups.get(self.deps.scheduler, created.uuid)
        resp.media = {"server_group": view(stored, ctx)}


class ServerGroup:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def _get(self, ctx: RequestContext, group_id: str) -> StoredGroup:
        found = run_read(self.deps.api_engine, lambda conn: store.get(conn, group_id.lower()))
        if found is None or (not ctx.is_admin and found.project_id != ctx.project_id):
            raise not_found(f"Instance group {group_id} could not be found.")
        return found

    def on_get(self, req, resp, group_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = self._get(ctx, group_id)
        ctx.authorize("os_compute_api:os-server-groups:show", found.project_id)
        resp.media = {"server_group": view(found, ctx)}

    def on_delete(self, req, resp, group_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = self._get(ctx, group_id)
        ctx.authorize("os_compute_api:os-server-groups:delete", found.project_id)
        groups.delete(self.deps.scheduler, found.uuid)
        resp.status = falcon.HTTP_204
