"""``GET /`` and ``GET /v2.1``: the version documents clients discover the API with."""
from __future__ import annotations

from billeting.api.compute.microversion import MAX, MIN, text

UPDATED = "2013-07-23T11:33:21Z"


def _version(base: str) -> dict:
    return {"id": "v2.1", "status": "CURRENT", "version": text(MAX), "min_version": text(MIN),
            "updated": UPDATED, "links": [{"rel": "self", "href": f"{base}/v2.1/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.compute+json;version=2.1"}]}


class Versions:
    def on_get(self, req, resp) -> None:
        resp.media = {"versions": [_version(req.prefix)]}


class Version:
    def on_get(self, req, resp) -> None:
        resp.media = {"version": _version(req.prefix)}
