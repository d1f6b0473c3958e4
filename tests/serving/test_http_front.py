"""The event-loop front of ``billeting.serving``, driven with hand-made bytes
against a small WSGI app (``toy_server``) in a real multi-process server:
bodies (chunked, truncated, too large), long request lines, malformed
requests, keep-alive and pipelining, all answered in JSON."""
from __future__ import annotations

import hashlib
import os
import socket

import pytest

from tests.serving.rawhttp import connect, exchange, port_of, read_answer, toy_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gate_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("gates"))


@pytest.fixture(scope="module")
def port(gate_dir) -> int:
    with toy_server("--workers", "2", "--max-body-size", "100000", gate_dir=gate_dir) as server:
        yield port_of(server)


def _echo(port: int, body: bytes, headers: bytes) -> tuple[int, bytes, dict]:
    answer = exchange(port, b"POST /echo HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n" + body, method="POST")
    return answer.status, answer.body, answer.headers


def test_a_plain_body_reaches_the_app_whole(port):
    body = os.urandom(50_000)
    status, echoed, headers = _echo(port, body, b"Content-Length: 50000\r\n")
    assert status == 200 and echoed == body
    assert headers["x-body-sha256"] == hashlib.sha256(body).hexdigest()


def test_a_chunked_body_is_decoded_before_the_app_sees_it(port):
    parts = [b"hello ", os.urandom(3000), b"", b"world"]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"
    status, echoed, headers = _echo(port, chunked, b"Transfer-Encoding: chunked\r\n")
    assert status == 200 and echoed == b"".join(parts)
    assert headers["x-body-length"] == str(len(b"".join(parts)))


def test_a_truncated_body_is_refused_and_never_reaches_the_app(port, gate_dir):
    for framing, sent in ((b"Content-Length: 100\r\n", b"x" * 40),
                          (b"Transfer-Encoding: chunked\r\n", b"a\r\n0123456789\r\n")):
        raw = b"POST /wait?name=truncated HTTP/1.1\r\nHost: t\r\n" + framing + b"\r\n" + sent
        answer = exchange(port, raw, half_close=True, method="POST")
        assert answer.status == 400, answer
        assert "ended" in answer.error["detail"] and "not processed" in answer.error["detail"]
    # The app would have left this mark the moment it was called.
    assert not os.path.exists(os.path.join(gate_dir, "truncated.started"))


def test_a_body_over_the_limit_gets_413_declared_or_chunked(port):
    status, body, _ = _echo(port, b"", b"Content-Length: 100001\r\n")
    assert status == 413
    chunk = b"x" * 60_000
    chunked = b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2 + b"0\r\n\r\n"
    answer = exchange(port, b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
                      method="POST")
    assert answer.status == 413 and "100000 bytes" in answer.error["detail"]


def test_expect_100_continue_is_honoured(port):
    with connect(port) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 100 ")
        sock.sendall(b"12345")
        answer = read_answer(sock, "POST")
    assert answer.status == 200 and answer.body == b"12345"


def test_a_64kb_request_line_is_accepted(port):
    query = "q=" + "x" * (64 * 1024)
    answer = exchange(port, f"GET /long?{query} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    assert answer.status == 200 and answer.body == f"hello GET /long {len(query)}".encode()


def test_request_lines_and_headers_past_the_limit_get_414_and_431(port):
    answer = exchange(port, b"GET /" + b"x" * 200_000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    assert answer.status == 414 and "request line" in answer.error["detail"]
    answer = exchange(port, b"GET / HTTP/1.1\r\nHost: t\r\n" + b"X-Big: " + b"y" * 200_000 + b"\r\n\r\n")
    assert answer.status == 431


@pytest.mark.parametrize("raw,status", [
    (b"G@T / HTTP/1.1\r\nHost: t\r\n\r\n", 400),  # bad method
    (b"GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n", 400),  # bad request line
    (b"GET / HTTP/9.9\r\nHost: t\r\n\r\n", 505),
    (b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 12x\r\n\r\n", 400),
    (b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
    (b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"GET / HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n", 400),
    (b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),  # bad chunk size
])
def test_malformed_requests_get_a_json_error(port, raw, status):
    answer = exchange(port, raw)
    assert answer.status == status, answer
    assert answer.error["status"] == answer.status
    assert answer.headers["connection"] == "close"


def test_an_exception_in_the_app_is_a_json_500(port):
    answer = exchange(port, b"GET /boom HTTP/1.1\r\nHost: t\r\n\r\n")
    assert answer.status == 500 and answer.error["title"] == "Internal Server Error"


def test_keep_alive_and_pipelined_requests_are_answered_in_order(port):
    four = b"GET /four HTTP/1.1\r\nHost: t\r\n\r\n"
    with connect(port) as sock:
        sock.sendall(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n"
                     b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
                     b"GET /three HTTP/1.1\r\nHost: t\r\n\r\n")
        answers = [read_answer(sock, method) for method in ("GET", "POST", "GET")]
        if answers[-1].headers.get("connection") != "close":
            sock.sendall(four)
            answers.append(read_answer(sock))
    if len(answers) == 3:
        # A worker may close a kept-alive connection once it has answered
        # everything queued on it, to even out the workers (``sheds_one``),
        # and says so; a client then sends its next request on a new one.
        with connect(port) as again:
            again.sendall(four)
            answers.append(read_answer(again))
    # Never while requests are queued behind an answer: the pipeline stays whole.
    assert all(a.headers.get("connection") != "close" for a in answers[:2])
    bodies = [a.body for a in answers]
    assert bodies == [b"hello GET /one 0", b"abc", b"hello GET /three 0", b"hello GET /four 0"]


def test_head_gets_headers_without_a_body(port):
    with connect(port) as sock:
        sock.sendall(b"HEAD /x HTTP/1.1\r\nHost: t\r\n\r\nGET /y HTTP/1.1\r\nHost: t\r\n\r\n")
        head = read_answer(sock, "HEAD")
        after = read_answer(sock)
    assert head.status == 200 and head.body == b"" and head.headers["content-length"] == str(len(b"hello HEAD /x 0"))
    assert after.body == b"hello GET /y 0"


def test_headers_with_underscores_do_not_reach_the_app(port):
    # X-Auth_Token would otherwise land in the same WSGI key as X-Auth-Token.
    with connect(port) as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nHost: t\r\nContent_Length: 5\r\n\r\n")
        assert read_answer(sock).status == 200


def test_a_client_that_closes_without_a_request_is_simply_dropped(port):
    with connect(port) as sock:
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""
