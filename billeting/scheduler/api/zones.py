"""``/availability_zones``: zones as aggregates with ``availability_zone`` metadata."""
from __future__ import annotations

from billeting.scheduler.api import schemas
from billeting.scheduler.api.base import Resource, authorize, body, send, send_empty
from billeting.scheduler.service import zones


class Zones(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        authorize(req, "scheduler:availability_zones:list")
        send(resp, {"availability_zones": zones.list_zones(self.service)})


class Zone(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, name: str) -> None:
        authorize(req, "scheduler:availability_zones:show")
        send(resp, zones.show(self.service, name))

    def on_put(self, req, resp, name: str) -> None:
        authorize(req, "scheduler:availability_zones:update")
        data = body(req, schemas.ZONE)
        view, created = zones.define(self.service, name, data["hosts"])
        send(resp, view, status=201 if created else 200)

    def on_delete(self, req, resp, name: str) -> None:
        authorize(req, "scheduler:availability_zones:delete")
        zones.remove(self.service, name)
        send_empty(resp)
