"""``/flavors/{id}/os-flavor-access`` and ``POST /flavors/{id}/action``
(addTenantAccess, removeTenantAccess): the projects a private flavor is open to.

As in Nova, creating a private flavor opens it to no project (not even the
creator's); an admin adds projects one by one.
"""
from __future__ import annotations

from billeting.api.compute import schemas
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import bad_request, conflict, not_found
from billeting.api.compute.flavors import flavor_or_404
from billeting.apidb import flavors


def _listing(deps: ComputeAPIDeps, flavorid: str) -> dict:
    projects = flavors.access_list(deps.api_engine, flavorid)
    if projects is None:  # deleted meanwhile
        raise not_found(f"Flavor {flavorid} could not be found.")
    return {"flavor_access": [{"flavor_id": flavorid, "tenant_id": p} for p in projects]}


class FlavorAccess:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp, flavor_id: str) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-flavor-access")
        flavor = flavor_or_404(self.deps, ctx, flavor_id)
        if flavor.is_public:
            raise not_found("Access list not available for public flavors.")
        resp.media = _listing(self.deps, flavor.flavorid)


class FlavorAction:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_post(self, req, resp, flavor_id: str) -> None:
        ctx: RequestContext = req.context.nova
        doc = schemas.body(req)
        if isinstance(doc, dict) and len(doc) == 1 and next(iter(doc)) not in schemas.FLAVOR_ACTION["properties"]:
            raise bad_request(f"There is no such action: {next(iter(doc))}")
        schemas.check(doc, schemas.FLAVOR_ACTION)
        (action, args), = doc.items()
        project = args["tenant"]
        if action == "addTenantAccess":
            ctx.authorize("os_compute_api:os-flavor-access:add_tenant_access")
            flavor = flavor_or_404(self.deps, ctx, flavor_id)
            if flavor.is_public:
                raise conflict("Can not add access to a public flavor.")
            try:
                flavors.add_access(self.deps.api_engine, flavor.id, project)
            except flavors.AccessExists:
                raise conflict(f"Flavor access already exists for flavor {flavor_id} and project {project} "
                               "combination.") from None
        else:
            ctx.authorize("os_compute_api:os-flavor-access:remove_tenant_access")
            flavor = flavor_or_404(self.deps, ctx, flavor_id)
            if not flavors.remove_access(self.deps.api_engine, flavor.id, project):
                raise not_found(f"Flavor access not found for {flavor_id} / {project} combination.")
        resp.media = _listing(self.deps, flavor.flavorid)
