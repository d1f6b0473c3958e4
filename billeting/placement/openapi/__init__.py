"""The OpenAPI 3.1 document of the Placement API, shipped as package data
(``openapi.json``) and built by ``document.build()`` from the route table,
the request schemas of ``billeting.placement.api.schemas`` and the response
shapes in ``shapes``. ``python -m billeting.placement.openapi`` rewrites the
shipped file; a test keeps the two identical."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

FILE_NAME = "openapi.json"


@lru_cache(maxsize=1)
def document_bytes() -> bytes:
    """The shipped document, exactly as served at ``GET /openapi.json``."""
    return resources.files(__package__).joinpath(FILE_NAME).read_bytes()
