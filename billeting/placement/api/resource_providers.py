"""``/resource_providers`` and ``/resource_providers/{uuid}``
(docs/design/placement-endpoints.md#resource-providers)."""
from __future__ import annotations

import uuid as uuidlib

from billeting.placement import names, providers
from billeting.placement.api import query, util
from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import queries as query_schemas
from billeting.placement.api.schemas import resource_providers as schemas
from billeting.placement.store.tx import run_read, run_write


def provider_links(req, uuid: str, mv: tuple[int, int]) -> list[dict]:
    base = util.href(req, f"/resource_providers/{uuid}")
    links = [
        {"rel": "self", "href": base},
        {"rel": "inventories", "href": f"{base}/inventories"},
        {"rel": "usages", "href": f"{base}/usages"},
    ]
    if mv >= (1, 1):
        links.append({"rel": "aggregates", "href": f"{base}/aggregates"})
    if mv >= (1, 6):
        links.append({"rel": "traits", "href": f"{base}/traits"})
    if mv >= (1, 11):
        links.append({"rel": "allocations", "href": f"{base}/allocations"})
    return links


def represent(req, provider: providers.Provider) -> dict:
    mv = req.context.mv
    body = {
        "uuid": provider.uuid,
        "name": provider.name,
        "generation": provider.generation,
        "links": provider_links(req, provider.uuid, mv),
    }
    if mv >= (1, 14):
        body["parent_provider_uuid"] = provider.parent_provider_uuid
        body["root_provider_uuid"] = provider.root_provider_uuid
    return body


def parse_list_filters(req) -> tuple[providers.ProviderFilters, dict[str, int] | None,
                                      query.TraitExpr | None]:
    mv = req.context.mv
    pairs = util.query_pairs(req)
    last = util.query_last(pairs)
    util.validate_query(last, query_schemas.providers_list(mv))
    filters = providers.ProviderFilters(name=last.get("name"), uuid=last.get("uuid"),
                                        in_tree=last.get("in_tree"))
    member_values = util.query_all(pairs, "member_of")
    if member_values:
        expr = query.parse_member_of(member_values, mv)
        filters.member_of = providers.MemberOf(required=expr.required, forbidden=expr.forbidden)
    resources = query.parse_resources(last["resources"]) if "resources" in last else None
    traits = None
    required_values = util.query_all(pairs, "required")
    if required_values:
        traits = query.parse_required(required_values, mv)
    return filters, resources, traits


def _parent_uuid(value):
    """Stored uuids are canonical, so look the parent up in that form
    (any spelling the schema's uuid format accepts finds it)."""
    return util.normalize_uuid(value) if isinstance(value, str) else value


class ResourceProviders(Resource):
    METHODS = ("GET", "POST")

    def on_get(self, req, resp) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:list")
        filters, resources, traits = parse_list_filters(req)

        def work(conn):
            if resources:
                ids = names.rc_ids(conn, resources)
                unknown = names.missing(resources, ids)
                if unknown:
                    raise HTTPProblem(400, "Invalid resource class in resources parameter: "
                                           f"No such resource class {unknown[0]}.")
                filters.resources = {ids[rc]: amount for rc, amount in resources.items()}
            if traits is not None:
                ids = names.trait_ids(conn, traits.names())
                unknown = names.missing(traits.names(), ids)
                if unknown:
                    raise HTTPProblem(400, 'Invalid trait(s) in "required" parameter: '
                                           f"No such trait(s): {', '.join(unknown)}.")
                filters.traits = providers.TraitFilter(
                    required=[{ids[n] for n in any_of} for any_of in traits.required],
                    forbidden={ids[n] for n in traits.forbidden})
            return providers.list_providers(conn, filters)

        found = run_read(self.engine, work)
        util.send_json(req, resp, {"resource_providers": [represent(req, p) for p in found]},
                       last_modified=util.newest(*(p.last_modified for p in found)))

    def on_post(self, req, resp) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:resource_providers:create")
        mv = req.context.mv
        body = util.read_json(req, schemas.create(mv))
        uuid = util.normalize_uuid(body["uuid"]) if "uuid" in body else str(uuidlib.uuid4())
        name = body["name"]
        if not name:
            raise HTTPProblem(400, f'Unable to create resource provider "{name}", {uuid}: '
                                   "Object action create failed because: name is required")
        parent = _parent_uuid(body.get("parent_provider_uuid"))

        provider = run_write(self.engine, lambda conn: providers.create(
            conn, name=name, uuid=uuid, parent_uuid=parent))
        resp.set_header("Location", util.location(req, f"/resource_providers/{provider.uuid}"))
        if mv >= (1, 20):
            util.send_json(req, resp, represent(req, provider), last_modified=provider.last_modified)
        else:
            util.send_empty(resp, 201)


class ResourceProvider(Resource):
    METHODS = ("GET", "DELETE", "PUT")

    def on_get(self, req, resp, uuid: str) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:show")
        provider = run_read(self.engine, lambda conn: providers.require(conn, uuid))
        util.send_json(req, resp, represent(req, provider), last_modified=provider.last_modified)

    def on_put(self, req, resp, uuid: str) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:resource_providers:update")
        mv = req.context.mv
        run_read(self.engine, lambda conn: providers.require(conn, uuid))
        body = util.read_json(req, schemas.update(mv))
        parent = _parent_uuid(body.get("parent_provider_uuid", providers.UNSET))

        def work(conn):
            provider = providers.require(conn, uuid)
            before = provider.last_modified
            updated = providers.update_provider(
                conn, provider, name=body["name"], parent_uuid=parent,
                allow_reparent=mv >= (1, 37))
            return updated, before

        provider, before = run_write(self.engine, work)
        util.send_json(req, resp, represent(req, provider), last_modified=before)

    def on_delete(self, req, resp, uuid: str) -> None:
        util.authorize(req, "placement:resource_providers:delete")
        run_write(self.engine, lambda conn: providers.delete_provider(conn, uuid))
        util.send_empty(resp)
