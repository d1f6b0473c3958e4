"""One client connection, read and written by the worker's event loop.

The loop reads the request line, the headers and the whole body (chunked
bodies decoded) under deadlines and size limits, and only then hands the
request to an application thread; a slow, stalled or hostile client costs a
socket and a deadline, never a thread. Parsing is httptools' (llhttp, the
parser of Node.js, in C: strict framing, chunked decoding); h11 did it first
and cost more loop time per request than the rest of the loop together.
Every response the server writes itself (malformed request, too large, too
slow, shutting down) is rendered by the service's ``render_error``.

A connection reads one request at a time, ahead of the answers: requests
that complete while another is with the application wait in ``queue``
(HTTP/1.1 pipelining) and are answered in order. Deadlines, checked by the
worker's sweep: ``header_timeout`` from a new connection or from the first
byte of a request to the end of its headers, ``body_timeout`` for the body,
``keepalive_timeout`` while idle between requests, ``send_timeout`` for a
client that does not read its answer.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from email.utils import formatdate
from typing import Protocol

import httptools

from billeting.serving.options import ServeOptions, reason_phrase
from billeting.serving.wsgi import AppResponse, CompleteRequest, error_response

LOG = logging.getLogger("billeting.serving")

# After an error response the server half-closes and discards what the client
# still sends for this long, so the client reads the response instead of a reset.
LINGER_S = 2.0
# The same when the worker is stopping: short, for a stop must be quick.
SHUTDOWN_LINGER_S = 0.1
# Requests read ahead while one is being answered; past this reading pauses.
PIPELINE_DEPTH = 4


class Reading(enum.Enum):
    WAIT = "waiting for a request"
    HEAD = "reading a request line and headers"
    BODY = "reading a body"
    STOPPED = "not reading any more"


class ConnectionHost(Protocol):
    """What a connection needs from its worker."""

    stopping: bool

    def submit(self, request: CompleteRequest) -> asyncio.Future[AppResponse]: ...

    def connection_opened(self, conn: HttpConnection) -> None: ...

    def connection_closed(self, conn: HttpConnection) -> None: ...

    def sheds_one(self) -> bool:
        """Close the connection just answered (its client reconnects elsewhere)?"""
        ...


@dataclass(frozen=True, slots=True)
class _Parsed:
    request: CompleteRequest
    keep_alive: bool


@dataclass(frozen=True, slots=True)
class _Refused:
    """A request the server answers itself with an error, then closes."""

    status: int
    detail: str


class _Limit(Exception):
    """Raised inside a parser callback to stop parsing with this error."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


_date_cache: tuple[int, bytes] = (0, b"")


def http_date() -> bytes:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True).encode("ascii"))
    return _date_cache[1]


class HttpConnection(asyncio.Protocol):
    def __init__(self, host: ConnectionHost, options: ServeOptions) -> None:
        self.host = host
        self.options = options
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] | None = None
        self.sockname: tuple[str, int] = ("", 0)
        self.reading = Reading.WAIT
        self.answered_one = False  # WAIT after an answer is keep-alive idleness
        self.head_bytes = 0  # raw bytes since the request began, until its headers end
        self.url_parts: list[bytes] = []
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.body_size = 0
        self.declared_length: int | None = None
        self.queue: deque[_Parsed | _Refused] = deque()
        self.in_flight: _Parsed | None = None  # with the application, or its answer still being sent
        self.app_started = 0.0
        self.ending = False  # answer what is queued, then close (client EOF, Connection: close, upgrade)
        self.eof = False  # the client shut its side: nothing more will come
        self.draining = False  # the answer is written; waiting for the client to read it
        self.closing = False  # closing, or lingering after an error response
        self.lingering = False  # after an error response: discarding input until EOF or the deadline
        self.write_paused = False
        self.reading_paused = False
        # When the current wait times out (loop time); the worker sweeps all
        # connections a few times a second, cheaper than a timer per phase.
        self.deadline = math.inf

    # --- asyncio callbacks ----------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        sockname = transport.get_extra_info("sockname")
        if isinstance(sockname, tuple):
            self.sockname = (str(sockname[0]), int(sockname[1]))
        self.host.connection_opened(self)
        # A fresh connection must send its request within the header timeout,
        # whether it sends bytes slowly or none at all.
        self._arm(self.options.header_timeout)

    def connection_lost(self, exc) -> None:
        self.closing = True
        self.deadline = math.inf
        self.body = []
        self.queue.clear()
        self.host.connection_closed(self)

    def data_received(self, data: bytes) -> None:
        if self.closing or self.reading is Reading.STOPPED:
            return
        if self.reading is Reading.WAIT:
            self._begin_reading()
        if self.reading is Reading.HEAD:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Protocol switches are not offered: answer what came, then close.
            self.reading = Reading.STOPPED
            self.ending = True
        except httptools.HttpParserCallbackError as exc:
            limit = exc.__context__
            if isinstance(limit, _Limit):
                self._refuse(limit.status, limit.detail)
            else:
                raise
        except httptools.HttpParserError as exc:
            self._refuse(*_malformed(exc))
        else:
            if self.reading is Reading.HEAD and self.head_bytes > self.options.max_header_size:
                # An incomplete head past the limit (a whole one is measured in the callbacks).
                self._refuse(*self._head_too_long())
        if self.in_flight is not None and len(self.queue) >= PIPELINE_DEPTH and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        self._advance()

    def eof_received(self) -> bool:
        if self.closing:
            return False  # asyncio closes the transport
        if self.reading is Reading.HEAD or self.reading is Reading.BODY:
            if self.reading is Reading.HEAD:
                detail = "The connection ended in the middle of the request line or headers."
            else:
                expected = (f"its Content-Length of {self.declared_length} bytes"
                            if self.declared_length is not None else "the final chunk")
                detail = (f"The request body ended after {self.body_size} bytes, before {expected}; "
                          "the request was not processed.")
            self._refuse(400, detail)
        self.reading = Reading.STOPPED
        self.ending = True
        self.eof = True
        if self.in_flight is None and not self.queue:
            return False
        self._advance()
        return True  # keep the transport open to write the answers

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.draining and not self.closing:
            self._finished_sending()

    # --- httptools callbacks ------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.reading is Reading.WAIT:  # a pipelined request after one that completed in the same read
            self._begin_reading()

    def on_url(self, url: bytes) -> None:
        self.url_parts.append(url)
        limit = self.options.max_header_size
        if sum(map(len, self.url_parts)) + 16 > limit:
            raise _Limit(414, f"The request line is longer than the limit of {limit} bytes.")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        limit = self.options.max_header_size
        size = sum(map(len, self.url_parts)) + 16 + sum(len(n) + len(v) + 4 for n, v in self.headers)
        if size > limit:
            raise _Limit(431, f"The request line and headers are longer than the limit of {limit} bytes.")
        if self.parser.get_http_version() not in ("1.1", "1.0"):
            raise _Limit(505, "Only HTTP/1.0 and HTTP/1.1 are supported.")
        self.declared_length = None
        expect_continue = False
        for name, value in self.headers:
            if name == b"content-length":
                self.declared_length = int(value)  # llhttp has checked it is one decimal integer
            elif name == b"expect" and value.lower() == b"100-continue":
                expect_continue = True
        if self.declared_length is not None and self.declared_length > self.options.max_body_size:
            raise _Limit(413, self._too_large())
        self.reading = Reading.BODY
        if self.in_flight is None and not self.queue:
            self._arm(self.options.body_timeout)
            if expect_continue:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self.body_size += len(body)
        if self.body_size > self.options.max_body_size:
            raise _Limit(413, self._too_large())
        self.body.append(body)

    def on_message_complete(self) -> None:
        request = CompleteRequest(
            method=self.parser.get_method().decode("latin-1"), target=b"".join(self.url_parts),
            http_version=self.parser.get_http_version(), headers=tuple(self.headers),
            body=b"".join(self.body), client=self.peer, server=self.sockname)
        self.queue.append(_Parsed(request, self.parser.should_keep_alive()))
        self.reading = Reading.WAIT
        self.url_parts, self.headers, self.body = [], [], []

    # --- moving on ------------------------------------------------------------------

    def _begin_reading(self) -> None:
        self.reading = Reading.HEAD
        self.head_bytes = 0
        self.body_size = 0
        if self.in_flight is None and not self.queue:
            self._arm(self.options.header_timeout)

    def _advance(self) -> None:
        """Start on the next queued request if none is in flight; else set the waiting deadline."""
        if self.in_flight is not None or self.closing:
            return
        if self.queue:
            item = self.queue.popleft()
            if isinstance(item, _Refused):
                self._reject(item.status, item.detail)
                return
            self.in_flight = item
            self.deadline = math.inf
            self.app_started = self.loop.time()
            self.host.submit(item.request).add_done_callback(self._app_done)
            return
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()
        if self.ending:
            self._close()
        elif self.reading is Reading.WAIT:
            self._arm(self.options.keepalive_timeout if self.answered_one else self.options.header_timeout)
        elif self.reading is Reading.HEAD:
            self._arm(self.options.header_timeout)
        elif self.reading is Reading.BODY:
            self._arm(self.options.body_timeout)

    def _app_done(self, future: asyncio.Future[AppResponse]) -> None:
        try:
            response = future.result()
        except BaseException:  # noqa: BLE001 - e.g. the pool shut down under it
            LOG.exception("application call failed")
            response = error_response(self.options.render_error, 500, "The request could not be processed.")
        if self.closing:
            response.not_sent()  # the client went away meanwhile; the work is done, the answer is dropped
            return
        self._respond(response)

    def _respond(self, response: AppResponse) -> None:
        parsed = self.in_flight
        request = parsed.request
        # A connection with nothing more from its client (no request queued or
        # begun) may be shed to even out the workers; its client reads
        # "Connection: close" before it sends anything more.
        closing = (self.ending or self.host.stopping or not parsed.keep_alive
                   or (not self.queue and self.reading is Reading.WAIT and self.host.sheds_one()))
        bodyless = request.method == "HEAD" or response.status in (204, 304)
        length = sum(map(len, response.body))
        lines = [b"HTTP/1.1 %d %s\r\n" % (response.status, response.reason)]
        declared = None
        has_date = False
        for name, value in response.headers:
            if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name or b":" in name:
                response.not_sent()
                return self._unsendable(f"header {name!r} cannot be sent")
            low = name.lower()
            if low == b"content-length":
                declared = value  # written below, once checked
                continue
            if low == b"connection" or low == b"transfer-encoding":
                continue  # framing and persistence are the server's business
            if low == b"date":
                has_date = True
            lines.append(b"%s: %s\r\n" % (name, value))
        if declared is not None:
            if not bodyless and declared.strip() != b"%d" % length:
                response.not_sent()
                return self._unsendable(f"Content-Length {declared!r} but a body of {length} bytes")
            lines.append(b"Content-Length: %s\r\n" % declared)
        elif response.status not in (204, 304):
            lines.append(b"Content-Length: %d\r\n" % length)  # for HEAD too: what a GET would have had
        if not has_date:
            lines.append(b"Date: %s\r\n" % http_date())
        if closing:
            lines.append(b"Connection: close\r\n")
        lines.append(b"\r\n")
        head = b"".join(lines)
        if bodyless or not length:
            self.transport.write(head)
        else:
            self.transport.writelines([head, *response.body])
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug('%s "%s %s HTTP/%s" %d %d %.1fms', self.peer[0] if self.peer else "-", request.method,
                      request.target[:500].decode("latin-1"), request.http_version, response.status, length,
                      (self.loop.time() - self.app_started) * 1000)
        self.answered_one = True
        if closing:
            self.in_flight = None
            self._close()
        elif self.write_paused:
            self.draining = True
            self._arm(self.options.send_timeout)
        else:
            self._finished_sending()

    def _finished_sending(self) -> None:
        self.draining = False
        self.in_flight = None
        self._advance()

    def _unsendable(self, why: str) -> None:
        # The application produced something HTTP cannot carry.
        request = self.in_flight.request
        LOG.error("unsendable response to %s %s: %s", request.method,
                  request.target[:200].decode("latin-1"), why)
        self.in_flight = None
        self._write_error(500, "An unexpected error prevented the server from fulfilling your request.")
        self._close()

    # --- errors the server answers itself -----------------------------------------

    def _too_large(self) -> str:
        return f"The request body is larger than the limit of {self.options.max_body_size} bytes."

    def _head_too_long(self) -> tuple[int, str]:
        limit = self.options.max_header_size
        if not self.headers and self.reading is Reading.HEAD and not self._url_complete():
            return 414, f"The request line is longer than the limit of {limit} bytes."
        return 431, f"The request line and headers are longer than the limit of {limit} bytes."

    def _url_complete(self) -> bool:
        # on_url pieces stop once the request line ends; a header callback
        # follows only when a whole header arrived, so look at the raw count.
        return self.head_bytes - sum(map(len, self.url_parts)) > 32

    def _refuse(self, status: int, detail: str) -> None:
        """Queue an error answer after whatever is already queued; read no more."""
        self.reading = Reading.STOPPED
        self.queue.append(_Refused(status, detail))
        self.url_parts, self.headers, self.body = [], [], []

    def _reject(self, status: int, detail: str, linger: float = LINGER_S) -> None:
        """Answer with an error, stop reading requests, close once the client had time to read it."""
        LOG.info("%s: %d %s", self.peer[0] if self.peer else "-", status, detail)
        self._write_error(status, detail)
        self.closing = True
        self.reading = Reading.STOPPED
        self.queue.clear()
        self.body = []
        if self.eof:  # the client sends nothing more: close as soon as the answer is out
            self._close()
            return
        self.lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()
        self._arm(linger)

    def _write_error(self, status: int, detail: str) -> None:
        page = self.options.render_error(status, detail)
        lines = [f"HTTP/1.1 {status} {reason_phrase(status)}".encode("latin-1"),
                 b"Content-Type: " + page.content_type.encode("latin-1"),
                 b"Content-Length: " + str(len(page.body)).encode(),
                 b"Date: " + http_date(),
                 b"Connection: close"]
        lines += [f"{name}: {value}".encode("latin-1") for name, value in page.headers]
        self.transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + page.body)

    # --- deadlines and closing ---------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self.deadline = self.loop.time() + seconds

    def expired(self) -> None:
        """The deadline passed (called by the worker's sweep)."""
        self.deadline = math.inf
        if self.closing or self.in_flight is not None:
            self.transport.abort()  # lingering, closing, or not reading its answer
        elif self.reading is Reading.HEAD:
            self._reject(408, "The request line and headers were not received within "
                              f"{self.options.header_timeout:g} seconds.")
        elif self.reading is Reading.BODY:
            self._reject(408, f"The request body was not received within {self.options.body_timeout:g} seconds.")
        else:
            self._close()  # nothing was asked: a quiet close, as for any idle keep-alive connection

    def _close(self) -> None:
        """Close once everything written has been sent (bounded by send_timeout)."""
        self.closing = True
        self.transport.close()
        self._arm(self.options.send_timeout)  # connection_lost disarms it once flushed

    def shutdown(self) -> None:
        """The worker is stopping: finish what the application is doing, drop the rest."""
        if self.closing:
            if self.lingering:  # an error answer is out; its linger must not hold the stop up
                self.deadline = min(self.deadline, self.loop.time() + SHUTDOWN_LINGER_S)
            return
        self.ending = True
        self.queue = deque(item for item in self.queue if isinstance(item, _Refused))
        if self.in_flight is not None:
            return  # answered with Connection: close, then closed
        if self.reading is Reading.HEAD or self.reading is Reading.BODY:
            self._reject(503, "The server is shutting down; send the request again.", linger=SHUTDOWN_LINGER_S)
        else:
            self._close()


def _malformed(exc: httptools.HttpParserError) -> tuple[int, str]:
    message = str(exc).rstrip(".") or "malformed request"
    if isinstance(exc, httptools.HttpParserInvalidMethodError):
        return 400, "Malformed HTTP request: invalid method."
    if isinstance(exc, httptools.HttpParserInvalidURLError):
        return 400, "Malformed HTTP request: invalid request target."
    if message == "Invalid HTTP version":
        return 505, "Only HTTP/1.0 and HTTP/1.1 are supported."
    if "Invalid character in Content-Length" in message:
        # upstream's words, which its own tests look for
        return 400, "Malformed HTTP request: content-length header must be an integer."
    if "Transfer-Encoding" in message and "invalid" in message:
        return 501, ("Unsupported Transfer-Encoding: send the body with Content-Length "
                     "or Transfer-Encoding: chunked.")
    return 400, f"Malformed HTTP request: {message.replace('`', '')}."
