"""``/resource_classes`` and ``/resource_classes/{name}``
(docs/design/placement-endpoints.md#resource-classes). From mv 1.2."""
from __future__ import annotations

from billeting.placement import resource_classes as rcs
from billeting.placement.api import util
from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import resource_classes as schemas
from billeting.placement.store.tx import run_read, run_write

MIN_VERSION = (1, 2)
# From 1.7 PUT creates-or-verifies without a body instead of renaming.
ENSURE_VERSION = (1, 7)


def represent(req, rc: rcs.ResourceClass) -> dict:
    return {"name": rc.name,
            "links": [{"rel": "self", "href": util.href(req, f"/resource_classes/{rc.name}")}]}


def _check_custom_name(name: str) -> None:
    """The schema, plus a strict full match: the schema's ``$`` would let a
    trailing newline through."""
    util.validate({"name": name}, schemas.BODY)
    if not rcs.is_custom_name(name):
        raise HTTPProblem(400, f"JSON does not validate: {name!r} does not match "
                               f"{rcs.CUSTOM_PATTERN!r}\n\n"
                               "Failed validating 'pattern' in schema['properties']['name']")


def _read_name(req) -> str:
    body = util.read_json(req, schemas.BODY)
    _check_custom_name(body["name"])
    return body["name"]


class ResourceClasses(Resource):
    METHODS = ("GET", "POST")

    def on_get(self, req, resp) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_classes:list")
        found = run_read(self.engine, rcs.list_all)
        util.send_json(req, resp, {"resource_classes": [represent(req, rc) for rc in found]},
                       last_modified=util.newest(*(rc.last_modified for rc in found)))

    def on_post(self, req, resp) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_json_content(req)
        util.authorize(req, "placement:resource_classes:create")
        name = _read_name(req)
        created = run_write(self.engine, lambda conn: rcs.create(conn, name))
        resp.set_header("Location", util.location(req, f"/resource_classes/{created.name}"))
        util.send_empty(resp, 201)


class ResourceClass(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, name: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_classes:show")
        found = run_read(self.engine, lambda conn: rcs.require(conn, name))
        util.send_json(req, resp, represent(req, found), last_modified=found.last_modified)

    def on_put(self, req, resp, name: str) -> None:
        util.require_version(req, MIN_VERSION)
        if req.context.mv < ENSURE_VERSION:
            self._rename(req, resp, name)
        else:
            self._ensure(req, resp, name)

    def _rename(self, req, resp, name: str) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:resource_classes:update")
        new_name = _read_name(req)  # body before lookup (docs/design/placement-http.md#processing-order)
        renamed = run_write(self.engine, lambda conn: rcs.rename(conn, name, new_name))
        # mv < 1.7 is below 1.15, so never any caching headers here.
        util.send_json(req, resp, represent(req, renamed), cache_headers=False)

    def _ensure(self, req, resp, name: str) -> None:
        util.authorize(req, "placement:resource_classes:update")
        _check_custom_name(name)
        _, created = run_write(self.engine, lambda conn: rcs.ensure(conn, name))
        resp.set_header("Location", util.location(req, f"/resource_classes/{name}"))
        util.send_empty(resp, 201 if created else 204)

    def on_delete(self, req, resp, name: str) -> None:
        util.require_version(req, MIN_VERSION)
        util.authorize(req, "placement:resource_classes:delete")
        run_write(self.engine, lambda conn: rcs.delete(conn, name))
        util.send_empty(resp)
