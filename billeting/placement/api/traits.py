"""``/traits``, ``/traits/{name}`` (docs/design/placement-endpoints.md#traits) and
``/resource_providers/{uuid}/traits`` (docs/design/placement-endpoints.md#provider-traits). From mv 1.6."""
from __future__ import annotations

from billeting.placement import providers, traits
from billeting.placement.api import util
from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import queries as query_schemas
from billeting.placement.api.schemas import traits as schemas
from billeting.placement.store.tx import run_read, run_write

MIN_VERSION = (1, 6)
_BAD_NAME_PARAM = ("Badly formatted name parameter. Expected name query string parameter in form: "
                   "?name=[in|startswith]:[name1,name2|prefix]. Got: ")
_INVALID_TRAIT = ('The trait is invalid. A valid trait must be no longer than 255 characters, '
                  'start with the prefix "CUSTOM_" and use following characters: '
                  '"A"-"Z", "0"-"9" and "_"')


def parse_list_query(req) -> traits.TraitQuery:
    pairs = util.query_pairs(req)
    last = util.query_last(pairs)
    util.validate_query(last, query_schemas.TRAITS_LIST)
    query = traits.TraitQuery()
    if "name" in last:
        value = last["name"]
        operator, colon, argument = value.partition(":")
        if not colon:
            raise HTTPProblem(400, f'{_BAD_NAME_PARAM}"{value}"')
        if operator == "in":
            query.names = argument.split(",")
        elif operator == "startswith":
            query.prefix = argument
        # Any other operator filters nothing (docs/design/placement-quirks.md#q6, kept for
        # compatibility).
    if "associated" in last:
        flag = last["associated"].lower()
        if flag not in ("true", "false"):
            raise HTTPProblem(400, 'The query parameter "associated" only accepts "true" or "false"')
        query.associated = flag == "true"
    return query


class Traits(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_accept_json(req)
        util.authorize(req, "placement:traits:list")
        query = parse_list_query(req)
        found = run_read(self.engine, lambda conn: traits.list_traits(conn, query))
        util.send_json(req, resp, {"traits": [trait.name for trait in found]},
                       last_modified=util.newest(*(trait.last_modified for trait in found)))


class Trait(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, name: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.authorize(req, "placement:traits:show")
        found = run_read(self.engine, lambda conn: traits.require(conn, name))
        util.send_empty(resp, 204)
        # Body-less, yet upstream sends the caching headers here
        # (docs/design/placement-http.md#caching-headers).
        util.set_cache_headers(req, resp, found.created_at)

    def on_put(self, req, resp, name: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.authorize(req, "placement:traits:update")
        if not traits.is_custom_name(name):
            raise HTTPProblem(400, _INVALID_TRAIT)
        trait, created = run_write(self.engine, lambda conn: traits.ensure(conn, name))
        resp.set_header("Location", util.location(req, f"/traits/{name}"))
        util.send_empty(resp, 201 if created else 204)
        util.set_cache_headers(req, resp, trait.created_at)

    def on_delete(self, req, resp, name: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.authorize(req, "placement:traits:delete")
        run_write(self.engine, lambda conn: traits.delete(conn, name))
        util.send_empty(resp)


def _provider_traits_body(found: traits.ProviderTraits) -> dict:
    return {"traits": [trait.name for trait in found.traits],
            "resource_provider_generation": found.generation}


class ProviderTraits(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, uuid: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:traits:list")

        def work(conn) -> traits.ProviderTraits:
            provider = providers.require(conn, uuid)
            return traits.ProviderTraits(traits.of_provider(conn, provider.id), provider.generation)

        found = run_read(self.engine, work)
        util.send_json(req, resp, _provider_traits_body(found),
                       last_modified=util.newest(*(trait.last_modified for trait in found.traits)))

    def on_put(self, req, resp, uuid: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_json_content(req)
        util.authorize(req, "placement:resource_providers:traits:update")
        # Here the body is validated before the provider is looked up
        # (docs/design/placement-http.md#processing-order).
        body = util.read_json(req, schemas.PROVIDER_TRAITS)
        result = run_write(self.engine, lambda conn: traits.set_for_provider(
            conn, uuid, body["traits"], body["resource_provider_generation"]))
        util.send_json(req, resp, _provider_traits_body(result),
                       last_modified=util.newest(*(trait.last_modified for trait in result.traits)))

    def on_delete(self, req, resp, uuid: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.authorize(req, "placement:resource_providers:traits:delete")
        run_write(self.engine, lambda conn: traits.clear_for_provider(conn, uuid))
        util.send_empty(resp)
