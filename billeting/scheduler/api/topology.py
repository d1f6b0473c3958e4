"""``/topology``: failure domains. ``PUT /topology/{level}/{name}`` with
``{"hosts": [...]}`` (narrowest level, cell) or ``{"members": [...]}``
(wider levels) creates (201) or redefines (200) a domain."""
from __future__ import annotations

from billeting.scheduler.api import schemas
from billeting.scheduler.api.base import Resource, authorize, body, send, send_empty
from billeting.scheduler.service import topology


class Topology(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        authorize(req, "scheduler:topology:list")
        send(resp, topology.list_domains(self.service))


class Level(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp, level: str) -> None:
        authorize(req, "scheduler:topology:list")
        send(resp, topology.list_domains(self.service, level))


class Domain(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, level: str, name: str) -> None:
        authorize(req, "scheduler:topology:show")
        send(resp, topology.show(self.service, level, name))

    def on_put(self, req, resp, level: str, name: str) -> None:
        authorize(req, "scheduler:topology:update")
        data = body(req, schemas.DOMAIN)
        view, created = topology.define(self.service, level, name, hosts=data.get("hosts"),
                                        members=data.get("members"))
        send(resp, view, status=201 if created else 200)

    def on_delete(self, req, resp, level: str, name: str) -> None:
        authorize(req, "scheduler:topology:delete")
        topology.remove(self.service, level, name)
        send_empty(resp)
