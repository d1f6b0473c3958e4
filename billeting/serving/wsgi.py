"""The bridge to a WSGI application: a complete request in, a complete response out.

Runs in an application thread. The event loop has already read the whole
body, so ``wsgi.input`` is an in-memory buffer and no read here can wait on
the network; the response is collected whole for the loop to write, so no
write here can wait on a slow reader either.
"""
from __future__ import annotations

import io
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urlsplit

from billeting.serving.options import ErrorRenderer, reason_phrase

LOG = logging.getLogger("billeting.serving")

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]

INTERNAL_ERROR_DETAIL = "An unexpected error prevented the server from fulfilling your request."
# An application may append callables to ``environ[UNSENT_KEY]``: the server
# calls them (on its event loop: they must not block) when the response it
# gave could not be handed to the connection, e.g. its client went away.
UNSENT_KEY = "billeting.serving.unsent"


@dataclass(frozen=True, slots=True)
class CompleteRequest:
    method: str
    target: bytes  # as sent: path and query, or an absolute URI
    http_version: str  # "1.1"
    headers: tuple[tuple[bytes, bytes], ...]  # names lower-cased by the parser
    body: bytes
    client: tuple[str, int] | None
    server: tuple[str, int]


@dataclass(frozen=True, slots=True)
class AppResponse:
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: list[bytes]
    unsent: tuple[Callable[[], None], ...] = ()  # see UNSENT_KEY

    def not_sent(self) -> None:
        call_unsent(self.unsent)


def call_unsent(callbacks) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception:  # noqa: BLE001 - one failing callback must not stop the others
            LOG.exception("a callback for a response not sent failed")


def build_environ(request: CompleteRequest, *, multiprocess: bool) -> dict:
    target = request.target
    if not target.startswith(b"/") and b"://" in target:  # absolute-form (RFC 9112 3.2.2)
        parts = urlsplit(target)
        target = (parts.path or b"/") + (b"?" + parts.query if parts.query else b"")
    path, _, query = target.partition(b"?")
    environ = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        # PEP 3333: the decoded path, bytes carried as latin-1 code points.
        "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "RAW_URI": request.target.decode("latin-1"),
        "SERVER_NAME": request.server[0],
        "SERVER_PORT": str(request.server[1]),
        "SERVER_PROTOCOL": f"HTTP/{request.http_version}",
        "REMOTE_ADDR": request.client[0] if request.client else "",
        "REMOTE_PORT": str(request.client[1]) if request.client else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.input_terminated": True,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in request.headers:
        if b"_" in raw_name:
            # X-User_Id would become HTTP_X_USER_ID like X-User-Id does: drop
            # such names so a client cannot pass for a header a proxy or the
            # auth layer sets.
            continue
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1")
        if name == "content-type":
            environ["CONTENT_TYPE"] = value
        elif name in ("content-length", "transfer-encoding"):
            continue  # the body is already decoded; its length is set below
        else:
            key = "HTTP_" + name.upper().replace("-", "_")
            environ[key] = f"{environ[key]},{value}" if key in environ else value
    if request.body or any(name == b"content-length" for name, _ in request.headers):
        environ["CONTENT_LENGTH"] = str(len(request.body))
    return environ


def call_app(app: WSGIApp, request: CompleteRequest, render_error: ErrorRenderer, *,
             multiprocess: bool) -> AppResponse:
    """Run the application on one request; any failure becomes a 500 in the service's format."""
    started: list = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info=None):
        if started and exc_info is None:
            raise RuntimeError("start_response called twice without exc_info")
        started[:] = [status, headers]  # nothing is sent before the app returns, so exc_info may replace it
        return written.append

    written: list[bytes] = []
    unsent: list[Callable[[], None]] = []
    try:
        environ = build_environ(request, multiprocess=multiprocess)
        environ[UNSENT_KEY] = unsent
        result = app(environ, start_response)
        try:
            body = written + [bytes(chunk) for chunk in result if chunk]
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if not started:
            raise RuntimeError("the application returned without calling start_response")
        code, _, reason = started[0].partition(" ")
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in started[1]]
        return AppResponse(int(code), reason.encode("latin-1"), headers, body, tuple(unsent))
    except Exception:  # noqa: BLE001 - whatever the app raised, the client gets a 500
        LOG.exception("unhandled error serving %s %s", request.method,
                      request.target[:200].decode("latin-1"))
        call_unsent(unsent)  # the application's own answer is replaced
        return error_response(render_error, 500, "internal_error", INTERNAL_ERROR_DETAIL)


def error_response(render_error: ErrorRenderer, status: int, code: str, detail: str) -> AppResponse:
    page = render_error(status, code, detail)
    headers = [(b"Content-Type", page.content_type.encode("latin-1")),
               (b"Content-Length", str(len(page.body)).encode())]
    headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in page.headers]
    return AppResponse(status, reason_phrase(status).encode(), headers, [page.body])
