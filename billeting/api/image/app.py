"""The image catalog (``billeting.apidb.images``) in Glance v2's shapes, read-only.

Billeting does not store images; ``billeting up`` serves this so that clients
that resolve an image through the Image API before booting (the ``openstack``
CLI's ``server create --image NAME``, its server list's image names) find the
catalog's entries. Only what those clients read is here: the version
document, ``GET /v2/images`` (``name``, ``id`` and ``id=in:A,B`` filters,
``limit``) and ``GET /v2/images/{id}``. Errors are in Glance's format.
"""
from __future__ import annotations

import logging

import falcon
import orjson
from sqlalchemy import Engine

from billeting.apidb import images
from billeting.apidb.images import CatalogImage

LOG = logging.getLogger(__name__)
_MAX_LIMIT = 1000


class ImageError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _document(status: int, message: str) -> bytes:
    return orjson.dumps({"code": status, "title": falcon.code_to_http_status(status)[4:], "message": message})


def _handle(req, resp, exc: Exception, params) -> None:
    if isinstance(exc, ImageError):
        status, message = exc.status, exc.message
    elif isinstance(exc, falcon.HTTPError):
        status, message = exc.status_code, exc.description or exc.title
    else:
        LOG.exception("image API request failed")
        status, message = 500, "The server has either erred or is incapable of performing the requested operation."
    resp.status = status
    resp.content_type = "application/json"
    resp.data = _document(status, message)


def view(image: CatalogImage) -> dict:
    """One image as Glance shows it: properties sit beside the standard fields."""
    return {**image.properties, "id": image.id, "name": image.name or None, "status": "active",
            "disk_format": image.disk_format, "container_format": "bare", "visibility": "public",
            "protected": False, "os_hidden": False, "tags": [], "min_disk": 0, "min_ram": 0, "size": None,
            "checksum": None, "owner": None, "self": f"/v2/images/{image.id}", "file": f"/v2/images/{image.id}/file",
            "schema": "/v2/schemas/image"}


class Versions:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        href = f"{req.prefix}/v2/"
        resp.data = orjson.dumps({"versions": [{"id": "v2.16", "status": "CURRENT",
                                                "links": [{"rel": "self", "href": href}]}]})
        resp.content_type = "application/json"


class Images:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = req.get_param("limit")
        if limit is not None and not (limit.isdigit() and int(limit) <= _MAX_LIMIT):
            raise ImageError(400, f"limit must be an integer from 0 to {_MAX_LIMIT}, not {limit!r}")
        found = images.listing(self.engine)
        name = req.get_param("name")
        if name is not None:
            found = [i for i in found if i.name == name]
        wanted = req.get_param("id")
        if wanted is not None:
            ids = set(wanted[3:].split(",")) if wanted.startswith("in:") else {wanted}
            found = [i for i in found if i.id in ids]
        if req.get_param("status") not in (None, "active") or req.get_param("visibility") not in (
                None, "public", "all"):
            found = []  # every catalog image is active and public
        if limit is not None:
            found = found[:int(limit)]
        resp.data = orjson.dumps({"images": [view(i) for i in found], "first": "/v2/images",
                                  "schema": "/v2/schemas/images"})
        resp.content_type = "application/json"

    def on_get_one(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        image = images.get(self.engine, image_id)
        if image is None:
            raise ImageError(404, f"No image found with ID {image_id}")
        resp.data = orjson.dumps(view(image))
        resp.content_type = "application/json"


def make_app(engine: Engine) -> falcon.App:
    app = falcon.App()
    app.req_options.strip_url_path_trailing_slash = True
    app.add_error_handler(Exception, _handle)
    app.add_route("/", Versions())
    app.add_route("/v2", Versions())
    listing = Images(engine)
    app.add_route("/v2/images", listing)
    app.add_route("/v2/images/{image_id}", listing, suffix="one")
    return app


def render_server_error(status: int, code: str, detail: str):
    """Errors the HTTP front answers itself, in this API's format."""
    from billeting.serving.options import ErrorBody

    return ErrorBody("application/json", _document(status, detail))
