"""``/resource_providers/{uuid}/aggregates`` (docs/design/placement-endpoints.md#provider-aggregates).
From mv 1.1; from 1.19 both directions carry the provider generation."""
from __future__ import annotations

from billeting.placement import aggregates, providers
from billeting.placement.api import util
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import aggregates as schemas
from billeting.placement.store.tx import run_read, run_write

MIN_VERSION = (1, 1)
GENERATION_VERSION = (1, 19)


def _body(req, found: aggregates.ProviderAggregates) -> dict:
    body: dict = {"aggregates": found.aggregates}
    if req.context.mv >= GENERATION_VERSION:
        body["resource_provider_generation"] = found.generation
    return body


class ProviderAggregates(Resource):
    METHODS = ("GET", "PUT")

    def on_get(self, req, resp, uuid: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:aggregates:list")

        def work(conn) -> aggregates.ProviderAggregates:
            provider = providers.require(conn, uuid)
            return aggregates.ProviderAggregates(aggregates.of_provider(conn, provider.id),
                                                 provider.generation)

        found = run_read(self.engine, work)
        # Associations carry no useful timestamp for the set as a whole: "now"
        # (docs/design/placement-http.md#caching-headers).
        util.send_json(req, resp, _body(req, found), last_modified=None)

    def on_put(self, req, resp, uuid: str) -> None:
        # Unlike elsewhere, 415 comes before the version gate here
        # (docs/design/placement-http.md#processing-order).
        util.require_json_content(req)
        util.require_version(req, MIN_VERSION)
        util.authorize(req, "placement:resource_providers:aggregates:update")
        body = util.read_json_for_provider(req, schemas.put(req.context.mv), self.engine, uuid)
        if req.context.mv >= GENERATION_VERSION:
            wanted, generation = body["aggregates"], body["resource_provider_generation"]
        else:
            wanted, generation = body, None
        result = run_write(self.engine, lambda conn: aggregates.set_for_provider(
            conn, uuid, wanted, given_generation=generation))
        util.send_json(req, resp, _body(req, result), last_modified=None)
