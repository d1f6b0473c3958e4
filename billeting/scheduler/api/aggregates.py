"""``/aggregates``: metadata on aggregates (tenant isolation, weigher multipliers)."""
from __future__ import annotations

from billeting.common import uuids
from billeting.common.http.errors import HTTPProblem
from billeting.scheduler.api import schemas
from billeting.scheduler.api.base import Resource, authorize, body, send, send_empty
from billeting.scheduler.service import metadata


def _uuid(value: str) -> str:
    if not uuids.is_uuid_like(value):
        raise HTTPProblem(404, f"not an aggregate uuid: {value}")
    return uuids.normalize_uuid(value)


class Aggregates(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        authorize(req, "scheduler:aggregates:list")
        send(resp, {"aggregates": metadata.list_aggregates(self.service)})


class Aggregate(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, uuid: str) -> None:
        authorize(req, "scheduler:aggregates:show")
        send(resp, metadata.show(self.service, _uuid(uuid)))

    def on_put(self, req, resp, uuid: str) -> None:
        authorize(req, "scheduler:aggregates:update")
        uuid = _uuid(uuid)
        data = body(req, schemas.AGGREGATE)
        view, created = metadata.put(self.service, uuid, metadata=data["metadata"], name=data.get("name"))
        send(resp, view, status=201 if created else 200)

    def on_delete(self, req, resp, uuid: str) -> None:
        authorize(req, "scheduler:aggregates:delete")
        metadata.remove(self.service, _uuid(uuid))
        send_empty(resp)
