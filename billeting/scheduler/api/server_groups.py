"""``/server_groups``: create (201), list, show, delete (204)."""
from __future__ import annotations

from billeting.common.http import util
from billeting.common.http.errors import HTTPProblem
from billeting.scheduler.api import schemas
from billeting.scheduler.api.base import Resource, authorize, body, ctx, send, send_empty
from billeting.scheduler.service import groups


class ServerGroups(Resource):
    METHODS = ("GET", "POST")

    def on_post(self, req, resp) -> None:
        authorize(req, "scheduler:server_groups:create")
        data = body(req, schemas.SERVER_GROUP)
        caller = ctx(req)
        project_id = data.get("project_id", caller.project_id)
        user_id = data.get("user_id", caller.user_id)
        if not project_id or not user_id:
            raise HTTPProblem(400, "project_id and user_id are needed: the caller's token names no project")
        spec = groups.GroupSpec(name=data["name"], policy=data["policy"], project_id=project_id, user_id=user_id,
                                max_server_per_host=data.get("rules", {}).get("max_server_per_host"),
                                scope=data.get("scope", "host"))
        send(resp, groups.create(self.service, spec), status=201)

    def on_get(self, req, resp) -> None:
        authorize(req, "scheduler:server_groups:list")
        params = util.query_last(util.query_pairs(req))
        util.validate_query(params, _LIST_QUERY)
        project_id = params.get("project_id")
        send(resp, {"server_groups": [groups.view(g) for g in groups.list_groups(self.service, project_id)]})


_LIST_QUERY = {"type": "object", "properties": {"project_id": schemas.NAME},
               "additionalProperties": False}


class ServerGroup(Resource):
    METHODS = ("GET", "DELETE")

    def on_get(self, req, resp, uuid: str) -> None:
        authorize(req, "scheduler:server_groups:show")
        send(resp, groups.view(groups.get(self.service, uuid)))

    def on_delete(self, req, resp, uuid: str) -> None:
        authorize(req, "scheduler:server_groups:delete")
        groups.delete(self.service, uuid)
        send_empty(resp)
