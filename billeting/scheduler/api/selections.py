"""``POST /selections``: place instances (201 + the Selections), or rank
hosts without claiming (``dry_run``: 200 + the ranked hosts and each
weigher's score). No host: 409 ``billeting.no_valid_host`` with an
explanation (see ``app``).

The body is a ``ScheduleRequest`` as JSON plus ``alternates`` and
``dry_run``; ``server_group`` may be a stored group's uuid. Or the Nova
form: ``flavor`` (+ ``image``, ``scheduler_hints``), translated by
``billeting.scheduler.nova``. ``project_id``/``user_id`` default to the
caller's.
"""
from __future__ import annotations

import functools

import msgspec

from billeting import typeinfo
from billeting.common import uuids
from billeting.common.http import util
from billeting.common.http.errors import HTTPProblem
from billeting.scheduler import metrics, nova
from billeting.scheduler.api import schemas
from billeting.scheduler.api.base import Resource, authorize, body, ctx, send
from billeting.scheduler.bounds import MAX_AMOUNT, over_amount
from billeting.scheduler.request import Destination, ScheduleRequest
from billeting.serving.wsgi import UNSENT_KEY


class Selections(Resource):
    METHODS = ("POST",)

    def on_post(self, req, resp) -> None:
        authorize(req, "scheduler:selections:create")
        data = body(req, {"type": "object"})
        nova_form = "flavor" in data
        util.validate(data, schemas.NOVA_SELECTIONS if nova_form else schemas.SELECTIONS, brief=True)
        alternates = data.pop("alternates", 0)
        dry_run = data.pop("dry_run", False)
        caller = ctx(req)
        data.setdefault("project_id", caller.project_id)
        data.setdefault("user_id", caller.user_id)
        if not data["project_id"] or not data["user_id"]:
            raise HTTPProblem(400, "project_id and user_id are needed: the caller's token names no project")
        service = self.service
        request, group = (from_nova(data, service.directory) if nova_form else from_typed(data))
        request = canonical_uuids(request)
        group = uuids.normalize_uuid(group) if group is not None else None
        if dry_run:
            ranked = service.dry_run(request, group=group)
            send(resp, {"hosts": ranked})
            return
        instances = request.instance_uuids

        def answer() -> None:
            with metrics.front_door("http"):
                selections = service.select(request, alternates, group=group)
            send(resp, {"selections": selections}, status=201)

        # Claims recorded while in flight (see ``inflight``): the record goes
        # as the answer is handed to the server; if the server then cannot
        # deliver it, nobody was told of these claims and they are released.
        service.inflight.run(instances, answer)
        req.env.setdefault(UNSENT_KEY, []).append(functools.partial(service.inflight.release, instances))


def canonical_uuids(request: ScheduleRequest) -> ScheduleRequest:
    """Every instance uuid in one spelling. The schema takes upper case, no
    dashes or braces (as Nova does), but Placement keeps a consumer as
    written: "ABC…" and "abc…" were two consumers, so one instance could be
    claimed twice, and a hint or group member written so matched nothing."""
    one = uuids.normalize_uuid

    def many(uuids) -> tuple[str, ...]:
        return tuple(one(u) for u in uuids)

    instances = many(request.instance_uuids)
    if len(set(instances)) < len(instances):
        raise HTTPProblem(400, "instance_uuids names one instance twice (in two spellings)")
    group, near = request.server_group, request.near
    return msgspec.structs.replace(
        request, instance_uuids=instances, same_host=many(request.same_host),
        different_host=many(request.different_host),
        domain_constraints=tuple(msgspec.structs.replace(c, instances=many(c.instances))
                                 for c in request.domain_constraints),
        near=msgspec.structs.replace(near, instances=many(near.instances)) if near is not None else None,
        server_group=(msgspec.structs.replace(group, uuid=one(group.uuid), members=many(group.members))
                      if group is not None else None))


_to_request = typeinfo.converter(ScheduleRequest)
_to_flavor = typeinfo.converter(nova.Flavor)
_to_image = typeinfo.converter(nova.Image)
_to_destination = typeinfo.converter(Destination)


def _convert(data: dict, to):
    try:
        return to(data)
    except msgspec.ValidationError as exc:
        raise HTTPProblem(400, f"JSON does not validate: {util.cut_short(str(exc))}") from None


def _any_of_lists(group: dict) -> dict:
    """A request group with every ``required``/``member_of`` entry an any-of
    list: a lone name is the list of that one name."""
    for key in ("required", "member_of"):
        if key in group:
            group = {**group, key: [[e] if isinstance(e, str) else e for e in group[key]]}
    return group


def from_typed(data: dict) -> tuple[ScheduleRequest, str | None]:
    group = data.get("server_group")
    if isinstance(group, str):
        data = {k: v for k, v in data.items() if k != "server_group"}
    else:
        group = None
    data = {**data, "groups": [_any_of_lists(g) for g in data["groups"]]}
    return _convert(data, _to_request), group


def from_nova(data: dict, directory) -> tuple[ScheduleRequest, str | None]:
    hints = dict(data.get("scheduler_hints") or {})
    group = hints.pop("group", None)
    same_host = hints.pop("same_host", [])
    different_host = hints.pop("different_host", [])
    try:
        constraints, near = nova.domain_hints(hints, directory)
    except nova.BadHint as exc:
        raise HTTPProblem(400, f"scheduler_hints: {exc}") from None
    flavor = _convert(data["flavor"], _to_flavor)
    image = _convert(data["image"], _to_image) if "image" in data else None
    destination = _convert(data["destination"], _to_destination) if "destination" in data else None
    try:
        request = nova.request_from_nova(
            flavor, image, instance_uuids=data["instance_uuids"], project_id=data["project_id"],
            user_id=data["user_id"], is_bfv=data.get("is_bfv", False),
            availability_zone=data.get("availability_zone"), same_host=same_host, different_host=different_host,
            destination=destination, ignore_hosts=data.get("ignore_hosts", ()), domain_constraints=constraints,
            near=near)
    except nova.Unmodelled as exc:
        raise HTTPProblem(400, str(exc)) from None
    if not any(g.resources for g in request.groups):
        raise HTTPProblem(400, "the flavor asks for no resources")
    over = over_amount(request.groups)
    if over is not None:  # an extra spec's amount, or root + ephemeral + swap disk
        raise HTTPProblem(400, f"the flavor asks for {over[1]} {over[0]}: Placement holds at most {MAX_AMOUNT} "
                               "of a resource class")
    if hints:
        request = msgspec.structs.replace(request, hints={k: tuple(v) for k, v in hints.items()})
    return request, group
