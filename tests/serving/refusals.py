"""One request for each kind of error the HTTP front answers itself, with
the status and code (``billeting.serving.protocol.CODES``) it must get; the
tests send them to real servers of every service and check each service's
error format."""
from __future__ import annotations

from dataclasses import dataclass

from tests.serving.rawhttp import Answer, exchange

H = b"Host: t\r\n"
POST = b"POST / HTTP/1.1\r\n" + H


@dataclass(frozen=True)
class Refusal:
    name: str
    raw: bytes
    status: int
    code: str
    half_close: bool = False  # shut our side after sending (a truncated request)


def cases(max_body_size: int = 4 * 1024 * 1024) -> list[Refusal]:
    """``max_body_size``: the server's, to send one chunked body past it."""
    big_chunk = b"%x\r\n" % (max_body_size + 1) + b"x" * (max_body_size + 1) + b"\r\n0\r\n\r\n"
    return [
        Refusal("bad method", b"G@T / HTTP/1.1\r\n" + H + b"\r\n", 400, "bad_method"),
        Refusal("TLS hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, "bad_method"),
        Refusal("control char in target", b"GET /\x01 HTTP/1.1\r\n" + H + b"\r\n", 400, "bad_request_target"),
        Refusal("junk after version", b"GET / HTTP/1.1 extra\r\n" + H + b"\r\n", 400, "bad_request_line"),
        Refusal("space in target", b"GET /a b HTTP/1.1\r\n" + H + b"\r\n", 400, "bad_request_line"),
        Refusal("HTTP/11.1", b"GET / HTTP/11.1\r\n" + H + b"\r\n", 400, "bad_request_line"),
        Refusal("HTTP/9.9", b"GET / HTTP/9.9\r\n" + H + b"\r\n", 505, "http_version_not_supported"),
        Refusal("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "http_version_not_supported"),
        Refusal("bad header name", b"GET / HTTP/1.1\r\n" + H + b"Bad Header: x\r\n\r\n", 400, "bad_header"),
        Refusal("control char in header", b"GET / HTTP/1.1\r\n" + H + b"X: a\x01b\r\n\r\n", 400, "bad_header"),
        Refusal("Content-Length not a number", POST + b"Content-Length: 12x\r\n\r\n", 400, "bad_content_length"),
        Refusal("duplicate Content-Length", POST + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n", 400,
                "bad_content_length"),
        Refusal("Content-Length overflow", POST + b"Content-Length: 99999999999999999999999\r\n\r\n", 400,
                "bad_content_length"),
        Refusal("Content-Length and chunked", POST + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                400, "bad_content_length"),
        Refusal("gzip transfer coding", POST + b"Transfer-Encoding: gzip\r\n\r\n", 501,
                "unsupported_transfer_encoding"),
        Refusal("chunked then gzip", POST + b"Transfer-Encoding: chunked, gzip\r\n\r\n", 501,
                "unsupported_transfer_encoding"),
        Refusal("bad chunk size", POST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "bad_chunk"),
        Refusal("chunk size overflow", POST + b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", 400,
                "bad_chunk"),
        Refusal("chunk without CRLF", POST + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400, "bad_chunk"),
        Refusal("declared body too large", POST + b"Content-Length: %d\r\n\r\n" % (max_body_size + 1), 413,
                "request_too_large"),
        Refusal("chunked body too large", POST + b"Transfer-Encoding: chunked\r\n\r\n" + big_chunk, 413,
                "request_too_large"),
        Refusal("request line too long", b"GET /" + b"r" * 140_000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414,
                "request_line_too_long"),
        Refusal("headers too large", b"GET / HTTP/1.1\r\n" + H + b"X-Pad: " + b"p" * 140_000 + b"\r\n\r\n", 431,
                "headers_too_large"),
        Refusal("truncated head", b"GET / HTTP/1.1\r\nHo", 400, "incomplete_request", half_close=True),
        Refusal("truncated body", POST + b"Content-Length: 100\r\n\r\n{\"a", 400, "incomplete_body",
                half_close=True),
    ]


def send(port: int, case: Refusal) -> Answer:
    answer = exchange(port, case.raw, half_close=case.half_close)
    assert answer.status == case.status, (case.name, answer)
    assert answer.headers["connection"] == "close", (case.name, answer)
    assert answer.headers["content-type"] == "application/json", (case.name, answer)
    return answer
