"""``GET /``: the version document (docs/design/placement-http.md#the-version-document).
No auth, no policy."""
from __future__ import annotations

from billeting.placement.api import microversion, util
from billeting.placement.api.resource import Resource


class Root(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        util.send_json(req, resp, {
            "versions": [{
                "id": "v1.0",
                "max_version": microversion.to_str(microversion.MAX_VERSION),
                "min_version": microversion.to_str(microversion.MIN_VERSION),
                "status": "CURRENT",
                "links": [{"rel": "self", "href": ""}],
            }]
        })
