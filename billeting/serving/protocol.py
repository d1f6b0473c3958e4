"""One client connection, read and written by the worker's event loop.

The loop reads the request line, the headers and the whole body (chunked
bodies decoded) under deadlines and size limits, and only then hands the
request to an application thread; a slow, stalled or hostile client costs a
socket and a deadline, never a thread. Parsing is httptools' (llhttp, the
parser of Node.js, in C: strict framing, chunked decoding); h11 did it first
and cost more loop time per request than the rest of the loop together.
Every response the server writes itself (malformed request, too large, too
slow, shutting down) is rendered by the service's ``render_error``, with a
short code naming what was wrong (``CODES`` lists them).

A connection reads one request at a time, ahead of the answers: requests
that complete while another is with the application wait in ``queue``
(HTTP/1.1 pipelining) and are answered in order. Deadlines, checked by the
worker's sweep: ``header_timeout`` from a new connection or from the first
byte of a request to the end of its headers, ``body_timeout`` for the body,
``keepalive_timeout`` while idle between requests, ``send_timeout`` for a
client that does not read its answer. A deadline runs from the start of its
phase: bytes trickling in do not restart it. At the worker's connection
limit, the connections that have waited longest on their clients are shed
(``shed``) to make room, rather than new clients left unanswered.
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
from billeting.serving.wsgi import INTERNAL_ERROR_DETAIL, AppResponse, CompleteRequest, error_response

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


# What the server answers itself, by code (the service puts it in its own
# namespace, e.g. ``billeting.request_too_large``).
CODES = {
    "bad_method": 400, "bad_request_target": 400, "bad_request_line": 400, "bad_header": 400,
    "bad_content_length": 400, "bad_chunk": 400, "malformed_request": 400, "incomplete_request": 400,
    "incomplete_body": 400, "header_timeout": 408, "body_timeout": 408, "request_too_large": 413,
    "request_line_too_long": 414, "headers_too_large": 431, "internal_error": 500,
    "unsupported_transfer_encoding": 501, "shutting_down": 503, "too_many_connections": 503,
    "http_version_not_supported": 505,
}


@dataclass(frozen=True, slots=True)
class _Refused:
    """A request the server answers itself with an error, then closes."""

    status: int
    code: str
    detail: str


class _Limit(Exception):
    """Raised inside a parser callback to stop parsing with this error."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.refused = _Refused(CODES[code], code, detail)


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
        self.armed_for: Reading | None = None  # the client phase the deadline times (None: the server's)
        self.armed_at = self.loop.time()  # when that wait began

    # --- asyncio callbacks ----------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        sockname = transport.get_extra_info("sockname")
        if isinstance(sockname, tuple):
            self.sockname = (str(sockname[0]), int(sockname[1]))
        # A fresh connection must send its request within the header timeout,
        # whether it sends bytes slowly or none at all.
        self._arm(self.options.header_timeout, Reading.HEAD)
        self.host.connection_opened(self)  # (which may shed others, the longest waiting: not this one)

    def connection_lost(self, exc) -> None:
        self.closing = True
        self._disarm()
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
                self._refuse(limit.refused)
            else:
                raise
        except httptools.HttpParserError as exc:
            self._refuse(_malformed(exc))
        else:
            if self.reading is Reading.HEAD and self.head_bytes > self.options.max_header_size:
                # An incomplete head past the limit (a whole one is measured in the callbacks).
                self._refuse(self._head_too_long())
        if self.in_flight is not None and len(self.queue) >= PIPELINE_DEPTH and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        self._advance()

    def eof_received(self) -> bool:
        if self.closing:
            return False  # asyncio closes the transport
        if self.reading is Reading.HEAD or self.reading is Reading.BODY:
            if self.reading is Reading.HEAD:
                self._refuse(_refusal("incomplete_request",
                                      "The connection ended in the middle of the request line or headers."))
            else:
                expected = (f"its Content-Length of {self.declared_length} bytes"
                            if self.declared_length is not None else "the final chunk")
                self._refuse(_refusal("incomplete_body", f"The request body ended after {self.body_size} bytes, "
                                                         f"before {expected}; the request was not processed."))
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
            raise _Limit("request_line_too_long", f"The request line is longer than the limit of {limit} bytes.")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        limit = self.options.max_header_size
        size = sum(map(len, self.url_parts)) + 16 + sum(len(n) + len(v) + 4 for n, v in self.headers)
        if size > limit:
            raise _Limit("headers_too_large",
                         f"The request line and headers are longer than the limit of {limit} bytes.")
        if self.parser.get_http_version() not in ("1.1", "1.0"):
            raise _Limit("http_version_not_supported", "Only HTTP/1.0 and HTTP/1.1 are supported.")
        self.declared_length = None
        expect_continue = False
        for name, value in self.headers:
            if name == b"content-length":
                self.declared_length = int(value)  # llhttp has checked it is one decimal integer
            elif name == b"expect" and value.lower() == b"100-continue":
                expect_continue = True
        if self.declared_length is not None and self.declared_length > self.options.max_body_size:
            raise _Limit("request_too_large", self._too_large())
        self.reading = Reading.BODY
        if self.in_flight is None and not self.queue:
            self._arm(self.options.body_timeout, Reading.BODY)
            if expect_continue:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self.body_size += len(body)
        if self.body_size > self.options.max_body_size:
            raise _Limit("request_too_large", self._too_large())
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
        if self.in_flight is None and not self.queue and self.armed_for is not Reading.HEAD:
            self._arm(self.options.header_timeout, Reading.HEAD)  # (a new connection's runs from connecting)

    def _advance(self) -> None:
        """Start on the next queued request if none is in flight; else set the waiting deadline."""
        if self.in_flight is not None or self.closing:
            return
        if self.queue:
            item = self.queue.popleft()
            if isinstance(item, _Refused):
                self._reject(item)
                return
            self.in_flight = item
            self._disarm()
            self.app_started = self.loop.time()
            self.host.submit(item.request).add_done_callback(self._app_done)
            return
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()
        if self.ending:
            self._close()
        elif self.reading is Reading.WAIT and self.answered_one:
            if self.armed_for is not Reading.WAIT:
                self._arm(self.options.keepalive_timeout, Reading.WAIT)
        elif self.reading is Reading.WAIT or self.reading is Reading.HEAD:
            if self.armed_for is not Reading.HEAD:
                self._arm(self.options.header_timeout, Reading.HEAD)
        elif self.reading is Reading.BODY and self.armed_for is not Reading.BODY:
            self._arm(self.options.body_timeout, Reading.BODY)

    def _app_done(self, future: asyncio.Future[AppResponse]) -> None:
        try:
            response = future.result()
        except BaseException:  # noqa: BLE001 - e.g. the pool shut down under it
            LOG.exception("application call failed")
            response = error_response(self.options.render_error, 500, "internal_error",
                                      "The request could not be processed.")
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
        self._write_error(_refusal("internal_error", INTERNAL_ERROR_DETAIL))
        self._close()

    # --- errors the server answers itself -----------------------------------------

    def _too_large(self) -> str:
        return f"The request body is larger than the limit of {self.options.max_body_size} bytes."

    def _head_too_long(self) -> _Refused:
        limit = self.options.max_header_size
        if not self.headers and self.reading is Reading.HEAD and not self._url_complete():
            return _refusal("request_line_too_long", f"The request line is longer than the limit of {limit} bytes.")
        return _refusal("headers_too_large",
                        f"The request line and headers are longer than the limit of {limit} bytes.")

    def _url_complete(self) -> bool:
        # on_url pieces stop once the request line ends; a header callback
        # follows only when a whole header arrived, so look at the raw count.
        return self.head_bytes - sum(map(len, self.url_parts)) > 32

    def _refuse(self, refused: _Refused) -> None:
        """Queue an error answer after whatever is already queued; read no more."""
        self.reading = Reading.STOPPED
        self.queue.append(refused)
        self.url_parts, self.headers, self.body = [], [], []

    def _reject(self, refused: _Refused, linger: float = LINGER_S) -> None:
        """Answer with an error, stop reading requests, close once the client had time to read it."""
        LOG.info("%s: %d %s", self.peer[0] if self.peer else "-", refused.status, refused.detail)
        self._write_error(refused)
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

    def _write_error(self, refused: _Refused) -> None:
        status = refused.status
        page = self.options.render_error(status, refused.code, refused.detail)
        lines = [f"HTTP/1.1 {status} {reason_phrase(status)}".encode("latin-1"),
                 b"Content-Type: " + page.content_type.encode("latin-1"),
                 b"Content-Length: " + str(len(page.body)).encode(),
                 b"Date: " + http_date(),
                 b"Connection: close"]
        lines += [f"{name}: {value}".encode("latin-1") for name, value in page.headers]
        self.transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + page.body)

    # --- deadlines and closing ---------------------------------------------------------

    def _arm(self, seconds: float, phase: Reading | None = None) -> None:
        """Time out in ``seconds``; ``phase``: the client's wait this times,
        which later reads in the same phase leave running."""
        self.armed_at = self.loop.time()
        self.deadline = self.armed_at + seconds
        self.armed_for = phase

    def _disarm(self) -> None:
        self.deadline = math.inf
        self.armed_for = None

    def expired(self) -> None:
        """The deadline passed (called by the worker's sweep)."""
        self._disarm()
        if self.closing or self.in_flight is not None:
            self.transport.abort()  # lingering, closing, or not reading its answer
        elif self.reading is Reading.HEAD:
            self._reject(_refusal("header_timeout", "The request line and headers were not received within "
                                                    f"{self.options.header_timeout:g} seconds."))
        elif self.reading is Reading.BODY:
            self._reject(_refusal("body_timeout", "The request body was not received within "
                                                  f"{self.options.body_timeout:g} seconds."))
        else:
            self._close()  # nothing was asked: a quiet close, as for any idle keep-alive connection

    def stalled_since(self) -> float | None:
        """Since when this connection has waited on its client (a request,
        or the rest of one), for ``shed``; None while the server owes it an
        answer or is closing it."""
        if self.in_flight is not None or self.queue or self.closing:
            return None
        return self.armed_at

    def shed(self) -> None:
        """Close to make room for other clients: quietly when nothing was
        asked, with a 503 when a request was begun, at once after an error."""
        if self.lingering:
            self.transport.abort()
            return
        if self.reading is Reading.HEAD or self.reading is Reading.BODY:
            LOG.info("%s: shed mid-request at the connection limit", self.peer[0] if self.peer else "-")
            self._write_error(_refusal("too_many_connections", "The server holds too many connections and this "
                                       "request was the slowest to arrive; send it again."))
        self.reading = Reading.STOPPED
        self.queue.clear()
        self._close()

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
            self._reject(_refusal("shutting_down", "The server is shutting down; send the request again."),
                         linger=SHUTDOWN_LINGER_S)
        else:
            self._close()


def _refusal(code: str, detail: str) -> _Refused:
    return _Refused(CODES[code], code, detail)


def _malformed(exc: httptools.HttpParserError) -> _Refused:
    """What llhttp refused, by the part of the request it names."""
    message = str(exc).rstrip(".") or "malformed request"
    if isinstance(exc, httptools.HttpParserInvalidMethodError):
        return _refusal("bad_method", "Malformed HTTP request: invalid method.")
    if isinstance(exc, httptools.HttpParserInvalidURLError):
        return _refusal("bad_request_target", "Malformed HTTP request: invalid request target.")
    if message == "Invalid HTTP version" or message == "Pause on PRI/Upgrade":  # the latter: HTTP/2's preface
        return _refusal("http_version_not_supported", "Only HTTP/1.0 and HTTP/1.1 are supported.")
    if "Invalid character in Content-Length" in message:
        # upstream's words, which its own tests look for
        return _refusal("bad_content_length", "Malformed HTTP request: content-length header must be an integer.")
    detail = f"Malformed HTTP request: {message.replace('`', '')}."
    if "Content-Length" in message:  # duplicate, overflowing, or with Transfer-Encoding
        return _refusal("bad_content_length", detail)
    if "Transfer-Encoding" in message:
        return _refusal("unsupported_transfer_encoding", "Unsupported Transfer-Encoding: send the body with "
                                                         "Content-Length or Transfer-Encoding: chunked.")
    lowered = message.lower()
    if "chunk" in lowered:
        return _refusal("bad_chunk", detail)
    if "header" in lowered:
        return _refusal("bad_header", detail)
    if any(word in lowered for word in ("version", "http/", "crlf", "dot")):
        return _refusal("bad_request_line", detail)
    return _refusal("malformed_request", detail)  # whatever a later llhttp may say
