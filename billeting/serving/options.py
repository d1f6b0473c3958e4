"""What a service tells the serving layer: where to listen, how many
processes and threads, how long a client may take, how much it may send,
and how to word the errors the server itself produces."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

import orjson

KIB = 1024
MIB = 1024 * KIB
# Far beyond any machine's useful count; above it a typo (99999999999) would
# fail deep in the master (the shared balance table) instead of as a usage error.
MAX_WORKERS = 1024
MAX_THREADS = 1024
# Idle keep-alive connections are closed after this (see ServeOptions).
KEEPALIVE_TIMEOUT_S = 75.0


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """An error response the server writes without calling the application."""

    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


# (status, code, detail) -> the response; ``code`` names what was wrong
# (``protocol.CODES``: "request_too_large", "header_timeout", ...) for the
# service to put in its own namespace. Called in the worker's event loop, so
# it must be quick and must not block.
ErrorRenderer = Callable[[int, str, str], ErrorBody]


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def json_errors(status: int, code: str, detail: str) -> ErrorBody:
    """The default: ``{"errors": [{"status", "title", "code", "detail"}]}``."""
    body = orjson.dumps({"errors": [{"status": status, "title": reason_phrase(status), "code": code,
                                     "detail": detail}]})
    return ErrorBody("application/json", body)


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    host: str
    port: int
    workers: int = 1
    threads: int = 4  # application threads per worker process
    # A client gets header_timeout from its first byte (or from connecting)
    # to finish the request line and headers, then body_timeout for the whole
    # body; an idle keep-alive connection is closed after keepalive_timeout;
    # a client that does not read its response is dropped after send_timeout.
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    # Longer than clients' polling intervals (the openstack CLI's --wait polls
    # every 5 s): a timeout equal to one closes the connection just as the
    # next poll is sent on it, which the client sees as a reset.
    keepalive_timeout: float = KEEPALIVE_TIMEOUT_S
    send_timeout: float = 30.0
    # How long SIGTERM/SIGINT waits for requests in flight before workers are killed.
    graceful_timeout: float = 10.0
    # The master replaces a worker whose event loop has not reported for this long.
    worker_timeout: float = 60.0
    max_body_size: int = 4 * MIB
    # Request line plus headers; a candidates query with hundreds of traits
    # makes a long request line, so this is generous.
    max_header_size: int = 128 * KIB
    # Open connections per worker; past it the worker stops accepting until
    # some close (each idle one costs a file descriptor and a little memory).
    max_connections: int = 1000
    log_level: str = "INFO"
    process_name: str = "billeting"
    on_ready: Callable[[str], None] | None = None
    render_error: ErrorRenderer = json_errors
    # In the master: a worker process has ended (pid); and the master stops.
    on_worker_exit: Callable[[int], None] | None = None
    on_exit: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        for name in ("workers", "threads", "max_body_size", "max_header_size", "max_connections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        for name, most in (("workers", MAX_WORKERS), ("threads", MAX_THREADS)):
            if getattr(self, name) > most:
                raise ValueError(f"{name} must be at most {most}, not {getattr(self, name)}")
        for name in ("header_timeout", "body_timeout", "keepalive_timeout", "send_timeout",
                     "graceful_timeout", "worker_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")

    @property
    def bind(self) -> str:
        return bind_address(self.host, self.port)

    @property
    def url(self) -> str:
        return f"http://{self.bind}/"
