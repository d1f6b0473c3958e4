"""``/resource_providers/{uuid}/usages`` and ``/usages`` (docs/design/placement-endpoints.md#usages)."""
from __future__ import annotations

from billeting.placement import errors, providers, usages
from billeting.placement.api import util
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import queries as query_schemas
from billeting.placement.store.tx import run_read

def _render_groups(groups: dict[str, usages.UsageGroup]) -> dict:
    return {name: {"consumer_count": group.consumer_count, **group.resources}
            for name, group in groups.items()}


class ProviderUsages(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp, uuid: str) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:usages")

        def work(conn):
            provider = providers.get(conn, uuid)
            if provider is None:
                raise errors.NotFound(f"No resource provider with uuid {uuid} found: "
                                      f"No resource provider with uuid {uuid} exists.")
            return provider.generation, usages.provider_usages(conn, provider.id)

        generation, used = run_read(self.engine, work)
        util.send_json(req, resp, {"resource_provider_generation": generation, "usages": used})


class Usages(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        util.require_version(req, (1, 9))
        util.require_accept_json(req)
        mv = req.context.mv
        params = util.query_last(util.query_pairs(req))
        # Authorized against the project asked about, before the parameters
        # are validated: a project reader may read its own project only.
        util.authorize(req, "placement:usages", {"project_id": params.get("project_id")})
        util.validate_query(params, query_schemas.usages(mv))
        project_id = params["project_id"]
        user_id = params.get("user_id")

        if mv >= (1, 38):
            consumer_type = params.get("consumer_type")
            groups = run_read(self.engine, lambda conn: usages.project_usages_by_type(
                conn, project_id, user_id, consumer_type))
            body = {"usages": _render_groups(groups)}
        else:
            body = {"usages": run_read(self.engine, lambda conn: usages.project_usages(
                conn, project_id, user_id))}
        util.send_json(req, resp, body)
