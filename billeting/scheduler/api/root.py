"""``GET /``: the version document (no auth, no policy)."""
from __future__ import annotations

from billeting.scheduler.api.base import Resource, send

VERSION = "1.0"


class Root(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        send(resp, {"versions": [{"id": "v1.0", "min_version": VERSION, "max_version": VERSION,
                                  "status": "CURRENT", "links": [{"rel": "self", "href": ""}]}]})
