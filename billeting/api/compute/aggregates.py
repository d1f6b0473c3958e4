"""``/os-aggregates``: Nova's host aggregates, over the scheduler's
(``scheduler.service.host_aggregates``: names and metadata in the API
database, hosts in Placement), admins only as in Nova."""
from __future__ import annotations

from billeting.api.compute import schemas
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request, not_found
from billeting.api.compute.schemas import INT_MAX
from billeting.api.compute.views import iso_micro
from billeting.scheduler.errors import SchedulerError
from billeting.scheduler.service import host_aggregates as aggs


def view(agg: aggs.HostAggregate, ctx: RequestContext, *, full: bool = True) -> dict:
    body = {"availability_zone": agg.availability_zone, "created_at": iso_micro(agg.created_at),
            "deleted": False, "deleted_at": None, "id": agg.id, "name": agg.name,
            "updated_at": iso_micro(agg.updated_at)}
    if full:  # (Nova's create answers without hosts and metadata)
        body["hosts"] = list(agg.hosts)
        body["metadata"] = agg.metadata
    if ctx.version.at_least(41):
        body["uuid"] = agg.uuid
    return body


def _id(text: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise bad_request("Invalid input received: id must be an integer")
    value = int(text)
    if value > INT_MAX:
        raise not_found(f"Aggregate {text} could not be found.")
    return value


def _call(fn, *args):
    """A host-aggregate operation, its refusals in Nova's format."""
    try:
        return fn(*args)
    except SchedulerError as exc:
        raise NovaError(exc.status, exc.detail) from None


def _authorized(req, action: str) -> RequestContext:
    ctx: RequestContext = req.context.nova
    ctx.authorize(f"os_compute_api:os-aggregates:{action}")
    return ctx


class Aggregates:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp) -> None:
        ctx = _authorized(req, "index")
        resp.media = {"aggregates": [view(a, ctx) for a in _call(aggs.list_all, self.deps.scheduler)]}

    def on_post(self, req, resp) -> None:
        ctx = _authorized(req, "create")
        doc = schemas.body(req)
        schemas.check(doc, schemas.AGGREGATE_CREATE)
        fields = doc["aggregate"]
        made = _call(aggs.create, self.deps.scheduler, fields["name"], fields.get("availability_zone"))
        resp.media = {"aggregate": view(made, ctx, full=False)}


class Aggregate:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp, aggregate_id: str) -> None:
        ctx = _authorized(req, "show")
        resp.media = {"aggregate": view(_call(aggs.get, self.deps.scheduler, _id(aggregate_id)), ctx)}

    def on_put(self, req, resp, aggregate_id: str) -> None:
        ctx = _authorized(req, "update")
        number = _id(aggregate_id)
        doc = schemas.body(req)
        schemas.check(doc, schemas.AGGREGATE_UPDATE)
        changed = _call(aggs.update, self.deps.scheduler, number, doc["aggregate"])
        resp.media = {"aggregate": view(changed, ctx)}

    def on_delete(self, req, resp, aggregate_id: str) -> None:
        _authorized(req, "delete")
        _call(aggs.delete, self.deps.scheduler, _id(aggregate_id))
        resp.status = 200  # (Nova answers a deleted aggregate with 200 and no body)


class AggregateAction:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_post(self, req, resp, aggregate_id: str) -> None:
        ctx: RequestContext = req.context.nova
        number = _id(aggregate_id)
        doc = schemas.body(req)
        if not isinstance(doc, dict) or len(doc) != 1:
            raise bad_request("Invalid request body: exactly one action is expected.")
        (key, args), = doc.items()
        if key not in schemas.AGGREGATE_ACTIONS:
            raise bad_request(f"There is no such action: {key}")
        ctx.authorize(f"os_compute_api:os-aggregates:{key}")
        schemas.check(args, schemas.AGGREGATE_ACTIONS[key])
        service = self.deps.scheduler
        if key == "set_metadata":
            changed = _call(aggs.set_metadata, service, number, args["metadata"])
        elif key == "add_host":
            changed = _call(aggs.add_host, service, number, args["host"])
        else:
            changed = _call(aggs.remove_host, service, number, args["host"])
        resp.media = {"aggregate": view(changed, ctx)}
