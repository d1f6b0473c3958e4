"""Many stalled sockets at once, and clients that trickle their request.

At its connection limit a worker used to stop accepting until stalled
connections timed out (10 s by default), so every new client waited that
long; now it sheds the connections that have waited longest on their
clients. A phase's deadline used to restart on every byte read, so a client
sending one byte a second was never timed out. What is asserted is what
happens (who is answered, who is shed, who is timed out), never how fast;
the added latency is measured by hand (see the branch's report)."""
from __future__ import annotations

import socket
import time

import pytest

from tests.serving.rawhttp import closed_by_peer, connect, exchange, port_of, read_answer, toy_server

pytestmark = pytest.mark.slow

LIMIT = 200
SILENT, HALF_LINES, HALF_BODIES = 60, 120, 120  # opened in this order, 300 > LIMIT in all


def _still_open(sock: socket.socket) -> bool:
    """Nothing written to it and not closed (looked at without reading)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer, or b"" at the end
    except BlockingIOError:
        return True
    except ConnectionResetError:
        pass
    finally:
        sock.settimeout(timeout)
    return False


def _open_group(port: int, count: int, first: bytes) -> list[socket.socket]:
    group = []
    for _ in range(count):
        sock = connect(port, timeout=10)
        if first:
            sock.sendall(first)
        group.append(sock)
    time.sleep(0.05)  # the next group is younger, whatever the loop clock's resolution
    return group


def test_at_the_connection_limit_the_longest_stalled_are_shed_and_others_served(tmp_path):
    with toy_server("--workers", "1", "--max-connections", str(LIMIT), "--header-timeout", "60",
                    "--body-timeout", "60", gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        silent = _open_group(port, SILENT, b"")
        half_lines = _open_group(port, HALF_LINES, b"GET /allocation_candidates?resources=VCPU:1&requi")
        half_bodies = _open_group(port, HALF_BODIES, b"PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{")
        try:
            # A normal client is served at once, not after the stalled ones' 60 s.
            for i in range(5):
                answer = exchange(port, f"GET /normal/{i} HTTP/1.1\r\nHost: t\r\n\r\n".encode(), timeout=10)
                assert answer.status == 200, answer
            # The oldest went first: every silent one, closed with nothing said...
            for sock in silent:
                sock.settimeout(10)
                assert sock.recv(1) == b""
            # ...then the oldest half request lines, answered 503 with a code.
            shed = []
            for sock in half_lines:
                if _still_open(sock):
                    continue
                sock.settimeout(10)
                shed.append(read_answer(sock))
            assert shed, "no half request line was shed"
            assert {(a.status, a.error["code"]) for a in shed} == {(503, "too_many_connections")}
            # No more than the limit stayed open, and the youngest all did.
            assert SILENT + len(shed) >= SILENT + HALF_LINES + HALF_BODIES + 1 - LIMIT
            assert all(_still_open(sock) for sock in half_bodies)
        finally:
            for sock in silent + half_lines + half_bodies:
                sock.close()
        assert "shedding the" in server.log()


@pytest.mark.parametrize("head, drip, code", [
    (b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ", b"s", "header_timeout"),
    (b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n", b"b", "body_timeout"),
], ids=["headers", "body"])
def test_a_client_that_trickles_its_request_is_timed_out_all_the_same(tmp_path, head, drip, code):
    with toy_server("--header-timeout", "1", "--body-timeout", "1", gate_dir=str(tmp_path)) as server:
        with connect(port_of(server)) as sock:
            sock.sendall(head)
            sock.settimeout(0.2)
            answer = None
            for _ in range(50):  # a byte every 0.2 s for up to 10 s: each one used to restart the deadline
                try:
                    sock.sendall(drip)
                    if sock.recv(1, socket.MSG_PEEK):
                        sock.settimeout(10)
                        answer = read_answer(sock)
                        break
                except TimeoutError:
                    continue
            assert answer is not None, "never timed out"
            assert answer.status == 408 and answer.error["code"] == code, answer
            assert closed_by_peer(sock, 10)


def test_a_flood_of_stalled_sockets_is_closed_by_the_deadlines(tmp_path):
    """Deadlines are handled a batch per sweep; all of a flood still expire."""
    with toy_server("--workers", "1", "--header-timeout", "1", gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        stalled = _open_group(port, 300, b"GET /x HTTP/1.1\r\nHo")
        try:
            assert exchange(port, b"GET /normal HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
            answers = []
            for sock in stalled:
                sock.settimeout(15)
                answers.append(read_answer(sock))
            assert {(a.status, a.error["code"]) for a in answers} == {(408, "header_timeout")}
        finally:
            for sock in stalled:
                sock.close()
