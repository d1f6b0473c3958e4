"""How a Placement client's requests travel: over HTTP to any Placement URL,
or straight into Billeting's own WSGI application in this process.

Both take a fully formed request and give back status, headers and body, so
the client above them is one piece of code whichever way it talks.
"""
from __future__ import annotations

import io
import sys
from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

import urllib3


class Response(NamedTuple):
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes


class TransportError(Exception):
    """The request could not be sent or no answer came back."""


class Transport(Protocol):
    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Response: ...

    def close(self) -> None: ...


def check_url(base_url: str) -> None:
    """ValueError unless ``base_url`` is http(s)://HOST[:PORT][/PATH]: what
    commands check before they start anything."""
    parts = urlsplit(base_url.rstrip("/"))
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number in range
    except ValueError:
        raise ValueError(f"not an http(s) URL (bad port): {base_url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {base_url!r}")


class HttpTransport:
    """Keep-alive HTTP(S) to one Placement endpoint; safe to share between threads."""

    def __init__(self, base_url: str, *, timeout: float = 30.0, pool_size: int = 16) -> None:
        check_url(base_url)
        parts = urlsplit(base_url.rstrip("/"))
        self.base_url = base_url.rstrip("/")
        self._prefix = parts.path
        self._pool = urllib3.connection_from_url(
            f"{parts.scheme}://{parts.netloc}", maxsize=pool_size, block=False,
            timeout=urllib3.Timeout(connect=min(timeout, 5.0), read=timeout),
            retries=False)

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Response:
        # One retry on a connection that the server closed while idle: it
        # carried nothing, so resending cannot apply a write twice.
        for attempt in (1, 2):
            try:
                resp = self._pool.urlopen(method, self._prefix + path, body=body, headers=headers,
                                          redirect=False, preload_content=True, retries=False)
                return Response(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.data)
            except urllib3.exceptions.ProtocolError as exc:
                if attempt == 2 or not _idle_close(exc):
                    raise TransportError(f"{method} {self.base_url}{path}: {exc}") from None
            except urllib3.exceptions.HTTPError as exc:
                raise TransportError(f"{method} {self.base_url}{path}: {exc}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._pool.close()


def _idle_close(exc: Exception) -> bool:
    text = str(exc)
    return "RemoteDisconnected" in text or "Connection aborted" in text or "reset" in text.lower()


class WsgiTransport:
    """Calls a WSGI application directly: no socket, same code path as HTTP."""

    def __init__(self, app, *, script_name: str = "") -> None:
        self.app = app
        self.script_name = script_name

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Response:
        path_only, _, query = path.partition("?")
        data = body or b""
        environ = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": self.script_name,
            "PATH_INFO": path_only,
            "QUERY_STRING": query,
            "SERVER_NAME": "billeting.local",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(data),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        if data:
            environ["CONTENT_LENGTH"] = str(len(data))
        for name, value in headers.items():
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE":
                environ["CONTENT_TYPE"] = value
            elif key != "CONTENT_LENGTH":
                environ["HTTP_" + key] = value
        captured: dict = {}

        def start_response(status, response_headers, exc_info=None):
            captured["status"] = int(status.split(" ", 1)[0])
            captured["headers"] = {k.lower(): v for k, v in response_headers}
            return lambda chunk: None

        result = self.app(environ, start_response)
        try:
            payload = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return Response(captured["status"], captured["headers"], payload)

    def close(self) -> None:
        pass
