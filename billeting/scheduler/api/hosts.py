"""``/hosts``: host reports (the scheduler's small host catalog table).
``PUT /hosts/{name}`` replaces a report; ``"heartbeat": true`` records
that the host is alive now."""
from __future__ import annotations

from billeting.apidb.host_reports import to_report_fields
from billeting.scheduler.api import schemas
from billeting.scheduler.api.base import Resource, authorize, body, send, send_empty
from billeting.scheduler.service import hosts


class Hosts(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        authorize(req, "scheduler:hosts:list")
        send(resp, {"hosts": hosts.list_hosts(self.service)})


class Host(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, name: str) -> None:
        authorize(req, "scheduler:hosts:show")
        send(resp, hosts.get(self.service, name))

    def on_put(self, req, resp, name: str) -> None:
        authorize(req, "scheduler:hosts:update")
        data = body(req, schemas.HOST_REPORT)
        heartbeat = data.pop("heartbeat", False)
        view, created = hosts.put(self.service, name, to_report_fields(data), heartbeat=heartbeat)
        send(resp, view, status=201 if created else 200)

    def on_delete(self, req, resp, name: str) -> None:
        authorize(req, "scheduler:hosts:delete")
        hosts.delete(self.service, name)
        send_empty(resp)
