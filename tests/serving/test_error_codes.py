"""Every error the HTTP front answers itself names what was wrong with a
code, which each service renders in its own format (the default renderer,
here, shows it as is). Raw bytes against a real multi-process server."""
from __future__ import annotations

import signal
import socket

import httptools
import pytest

from billeting.serving.protocol import CODES, _malformed
from tests.serving.rawhttp import closed_by_peer, connect, exchange, port_of, read_answer, toy_server
from tests.serving.refusals import cases, send

pytestmark = pytest.mark.slow

MAX_BODY = 100_000


@pytest.fixture(scope="module")
def port(tmp_path_factory) -> int:
    with toy_server("--workers", "2", "--max-body-size", str(MAX_BODY), "--header-timeout", "1",
                    "--body-timeout", "1", gate_dir=str(tmp_path_factory.mktemp("gates"))) as server:
        yield port_of(server)


@pytest.mark.parametrize("case", cases(MAX_BODY), ids=lambda c: c.name)
def test_each_refusal_carries_its_code(port, case):
    err = send(port, case).error
    assert err["code"] == case.code and err["status"] == CODES[case.code], err


@pytest.mark.parametrize("raw, code", [
    (b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow", "header_timeout"),
    (b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nab", "body_timeout"),
])
def test_a_timeout_carries_its_code(port, raw, code):
    with connect(port) as sock:
        sock.sendall(raw)
        answer = read_answer(sock)
    assert answer.status == 408 and answer.error["code"] == code, answer


def test_an_app_that_raises_is_a_500_with_a_code(port):
    answer = exchange(port, b"GET /boom HTTP/1.1\r\nHost: t\r\n\r\n")
    assert answer.status == 500 and answer.error["code"] == "internal_error", answer


def test_a_request_cut_off_by_a_stop_is_a_503_with_a_code(tmp_path):
    with toy_server(gate_dir=str(tmp_path)) as server, connect(port_of(server)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Half")
        with connect(port_of(server)) as probe:  # the request above has reached the worker
            probe.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert read_answer(probe).status == 200
        server.process.send_signal(signal.SIGTERM)
        answer = read_answer(sock)
        assert answer.status == 503 and answer.error["code"] == "shutting_down", answer
        assert closed_by_peer(sock, 10)


def test_a_parser_error_of_no_known_kind_is_a_malformed_request():
    refused = _malformed(httptools.HttpParserError("Something llhttp has not said before"))
    assert (refused.status, refused.code) == (400, "malformed_request")


def test_every_code_is_exercised_here():
    tested = {case.code for case in cases()} | {"header_timeout", "body_timeout", "internal_error", "shutting_down",
                                                "malformed_request",
                                                "too_many_connections"}  # test_stalled_floods.py
    assert tested == set(CODES)


def test_a_client_that_only_connects_is_closed_quietly(port):
    """Nothing was asked, so nothing is answered: not an error with a code."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        assert sock.recv(65536) == b""  # closed after the header timeout, with nothing written
