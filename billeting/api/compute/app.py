"""The compute API's WSGI app: routes, noauth2-style identity, microversions, Nova errors."""
from __future__ import annotations

import dataclasses

import falcon

from billeting.api.compute import (
    actions,
    aggregates,
    errors,
    flavor_access,
    flavors,
    limits,
    metrics,
    microversion,
    migrations,
    policy,
    root,
    server_groups,
    servers,
    services,
)
from billeting.api.compute.context import ComputeAPIDeps, RequestContext, new_request_id
from billeting.common.http.inputs import names_nothing, plausible_id
from billeting.common.policy import RuleEnforcer
from billeting.serving.metrics import RequestMetrics, RouteLabels

_ROOTS = ("", "/", "/v2.1", "/v2.1/", "/v2", "/v2/")
# Query parameters that may be given more than once; for every other one the
# last value counts, as in Nova (a handler never sees a list it did not expect).
_MULTI_VALUED = frozenset({"status", "sort_key", "sort_dir"})


# Keystone's default role hierarchy: a token names the roles its roles imply too.
_IMPLIED = {"admin": ("member", "reader"), "member": ("reader",)}


def _roles(header: str | None, user: str) -> frozenset[str]:
    """``X-Roles`` as given; without it the noauth2 token's user: ``admin``
    is an admin, anyone else a member of the token's project."""
    if header is None:
        named = {"admin"} if user == "admin" else {"member"}
    else:
        named = {r.strip().lower() for r in header.split(",") if r.strip()}
    return frozenset(named.union(*(_IMPLIED.get(r, ()) for r in named)))


class _Identity:
    """``X-Auth-Token: user[:project]`` or the Keystone headers
    ``X-User-Id``/``X-Project-Id``/``X-Roles``; the microversion."""

    def __init__(self, enforcer: RuleEnforcer) -> None:
        self.enforcer = enforcer

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        request_id = new_request_id()
        resp.set_header("x-openstack-request-id", request_id)
        resp.set_header("x-compute-request-id", request_id)
        version = microversion.negotiate({k.lower(): v for k, v in req.headers.items()})
        resp.set_header("OpenStack-API-Version", f"compute {version}")
        resp.set_header("X-OpenStack-Nova-API-Version", str(version))
        resp.set_header("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
        token = req.get_header("X-Auth-Token")
        user = req.get_header("X-User-Id")
        if not token and not user:
            if req.path in _ROOTS:
                req.context.nova = RequestContext("anonymous", "", False, version, request_id)
                return
            raise errors.NovaError(401, "Authentication required")
        tuser, _, tproject = (token or "").partition(":")
        user = user or tuser
        project = req.get_header("X-Project-Id") or tproject or user
        if not (plausible_id(user) and plausible_id(project)):  # (":" as a token, "alice :p1", ...)
            raise errors.NovaError(401, "Authentication required")
        ctx = RequestContext(user, project, False, version, request_id,
                             roles=_roles(req.get_header("X-Roles"), user), enforcer=self.enforcer)
        req.context.nova = dataclasses.replace(ctx, is_admin=ctx.can("context_is_admin"))
        # A NUL or edge whitespace in a segment: the same 404 on every backend (see names_nothing).
        if names_nothing(req.path):
            raise errors.NovaError(404, "The resource could not be found.")
        params = req.params
        for key, value in params.items():
            if isinstance(value, list) and key not in _MULTI_VALUED:
                params[key] = value = value[-1]
            if "\x00" in key or any("\x00" in v for v in (value if isinstance(value, list) else [value])):
                raise errors.bad_request(f"Invalid input for query parameters {key.replace(chr(0), '')}. "
                                         "NUL characters are not allowed.")

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        resp.set_header("Content-Type", "application/json") if resp.data or resp.media is not None else None


class _Routes:
    """Adds routes to the app and keeps their templates (the metrics' labels)."""

    def __init__(self, app: falcon.App) -> None:
        self.app = app
        self.templates: list[str] = []

    def add_route(self, template: str, resource, **kwargs) -> None:
        self.app.add_route(template, resource, **kwargs)
        self.templates.append(template)


def _not_allowed(environ, start_response):
    body = errors.document(405, "The method specified is not allowed for this resource.")
    start_response("405 Method Not Allowed", [("Content-Type", "application/json"), ("Allow", "GET"),
                                              ("Content-Length", str(len(body)))])
    return [body]


def make_app(deps: ComputeAPIDeps):
    """The WSGI app: every request counted by route template, ``GET /metrics``, the API."""
    app = falcon.App(middleware=[_Identity(deps.enforcer or policy.enforcer())])
    app.req_options.strip_url_path_trailing_slash = True
    app.add_error_handler(Exception, errors.handle_any)
    app.add_error_handler(falcon.HTTPError, errors.handle_http)
    app.add_error_handler(errors.NovaError, errors.handle_nova)
    routes = _Routes(app)
    routes.add_route("/", root.Versions())
    for prefix in ("/v2.1", "/v2"):
        routes.add_route(prefix, root.Version())
        _routes(routes, prefix, deps)
    labels = RouteLabels([*routes.templates, metrics.shared.PATH])
    return RequestMetrics(metrics.Endpoint(app, _not_allowed), labels, metrics.observe_request)


def _routes(app: _Routes, p: str, deps: ComputeAPIDeps) -> None:
    srv = servers.Servers(deps)
    app.add_route(f"{p}/servers", srv)
    app.add_route(f"{p}/servers/detail", srv, suffix="detail")
    app.add_route(f"{p}/servers/{{server_id}}", servers.Server(deps))
    app.add_route(f"{p}/servers/{{server_id}}/action", actions.ServerAction(deps))
    ia = actions.InstanceActions(deps)
    app.add_route(f"{p}/servers/{{server_id}}/os-instance-actions", ia)
    app.add_route(f"{p}/servers/{{server_id}}/os-instance-actions/{{request_id}}", ia, suffix="one")
    fl = flavors.Flavors(deps)
    app.add_route(f"{p}/flavors", fl)
    app.add_route(f"{p}/flavors/detail", fl, suffix="detail")
    app.add_route(f"{p}/flavors/{{flavor_id}}", flavors.Flavor(deps))
    app.add_route(f"{p}/flavors/{{flavor_id}}/action", flavor_access.FlavorAction(deps))
    app.add_route(f"{p}/flavors/{{flavor_id}}/os-flavor-access", flavor_access.FlavorAccess(deps))
    app.add_route(f"{p}/flavors/{{flavor_id}}/os-extra_specs", flavors.ExtraSpecs(deps))
    app.add_route(f"{p}/flavors/{{flavor_id}}/os-extra_specs/{{key}}", flavors.ExtraSpec(deps))
    app.add_route(f"{p}/os-server-groups", server_groups.ServerGroups(deps))
    app.add_route(f"{p}/os-server-groups/{{group_id}}", server_groups.ServerGroup(deps))
    app.add_route(f"{p}/os-migrations", migrations.Migrations(deps))
    sm = migrations.ServerMigrations(deps)
    app.add_route(f"{p}/servers/{{server_id}}/migrations", sm)
    app.add_route(f"{p}/servers/{{server_id}}/migrations/{{migration_id}}", sm, suffix="one")
    app.add_route(f"{p}/limits", limits.Limits(deps))
    app.add_route(f"{p}/os-aggregates", aggregates.Aggregates(deps))
    app.add_route(f"{p}/os-aggregates/{{aggregate_id}}", aggregates.Aggregate(deps))
    app.add_route(f"{p}/os-aggregates/{{aggregate_id}}/action", aggregates.AggregateAction(deps))
    az = services.AvailabilityZones(deps)
    app.add_route(f"{p}/os-availability-zone", az)
    app.add_route(f"{p}/os-availability-zone/detail", az, suffix="detail")
    app.add_route(f"{p}/os-services", services.Services(deps))
    app.add_route(f"{p}/os-services/{{service_id}}", services.Services(deps), suffix="one")
    hv = services.Hypervisors(deps)
    app.add_route(f"{p}/os-hypervisors", hv)
    app.add_route(f"{p}/os-hypervisors/detail", hv, suffix="detail")
    app.add_route(f"{p}/os-hypervisors/statistics", hv, suffix="statistics")
    app.add_route(f"{p}/os-hypervisors/{{hypervisor_id}}", hv, suffix="one")
