"""Clients that stall, and a server that must stop or lose a worker meanwhile.

Timings are reported (``-s`` shows them), never asserted: the deadlines here
are generous so a loaded machine cannot fail them; what is asserted is that
things happen at all (answers arrive, stalled sockets are closed, the
process exits, in-flight requests get their answer)."""
from __future__ import annotations

import os
import signal
import socket
import statistics
import threading
import time

import pytest

from tests.concurrency.serve import stop
from tests.serving.rawhttp import (
    child_pids,
    closed_by_peer,
    connect,
    exchange,
    port_of,
    read_answer,
    toy_server,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

STALLED = 100


def _stall(port: int, i: int) -> socket.socket:
    sock = connect(port)
    if i % 2:
        sock.sendall(b"GET /allocation_candidates?resources=VCPU:1&requi")  # half a request line
    else:
        sock.sendall(b"PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{\"half\": ")  # half a body
    return sock


def test_a_hundred_stalled_clients_neither_block_others_nor_stay_open(tmp_path):
    # One worker with two application threads: the old thread worker would
    # have been silenced by two stalled clients.
    with toy_server("--workers", "1", "--threads", "2", "--header-timeout", "2", "--body-timeout", "3",
                    gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        stalled = [_stall(port, i) for i in range(STALLED)]
        began = time.monotonic()
        latencies = []
        for i in range(20):
            start = time.perf_counter()
            answer = exchange(port, f"GET /normal/{i} HTTP/1.1\r\nHost: t\r\n\r\n".encode(), timeout=10)
            latencies.append((time.perf_counter() - start) * 1000)
            assert answer.status == 200 and answer.body == f"hello GET /normal/{i} 0".encode()
        print(f"\n{STALLED} stalled clients: 20 normal requests, latency median "
              f"{statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms")
        # Every stalled client is told 408 and disconnected by the deadlines.
        answers = []
        for sock in stalled:
            sock.settimeout(20)
            answers.append(read_answer(sock, "PUT"))
            assert closed_by_peer(sock, 20)
            sock.close()
        print(f"stalled clients all closed {time.monotonic() - began:.1f} s after they stalled")
        assert {a.status for a in answers} == {408}
        details = {a.error["detail"] for a in answers}
        assert details == {"The request line and headers were not received within 2 seconds.",
                           "The request body was not received within 3 seconds."}
        # And the server still serves.
        assert exchange(port, b"GET /after HTTP/1.1\r\nHost: t\r\n\r\n").status == 200


def test_a_client_silent_after_connecting_is_closed_and_an_idle_keep_alive_too(tmp_path):
    with toy_server("--header-timeout", "1", "--keepalive-timeout", "1", gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        silent = connect(port)
        idle = connect(port)
        idle.sendall(b"GET /once HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_answer(idle).status == 200
        # Nothing was asked on either: a quiet close, no error response.
        for sock in (silent, idle):
            sock.settimeout(15)
            assert sock.recv(100) == b""
            sock.close()


def test_a_client_that_does_not_read_its_answer_is_dropped(tmp_path):
    size = 64 * 1024 * 1024
    with toy_server("--send-timeout", "1", gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET /big?bytes={size} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        time.sleep(3)  # not reading: the server's send buffer fills, its send timeout passes
        received = 0
        sock.settimeout(20)
        try:
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            pass
        sock.close()
        assert received < size  # cut off, not delivered
        assert exchange(port, b"GET /still HTTP/1.1\r\nHost: t\r\n\r\n").status == 200


def _request_in_thread(port: int, path: str, results: list) -> threading.Thread:
    def run():
        try:
            results.append(exchange(port, f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode(), timeout=30))
        except OSError as exc:  # recorded, and the test fails on it
            results.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stop_answers_requests_in_flight_and_drops_stalled_clients(tmp_path, sig):
    gates = str(tmp_path)
    with toy_server("--workers", "2", gate_dir=gates) as server:
        port = port_of(server)
        idle = connect(port)  # an idle client must not hold the stop up
        stalled = _stall(port, 0)
        results: list = []
        thread = _request_in_thread(port, "/wait?name=inflight", results)
        wait_for(lambda: os.path.exists(os.path.join(gates, "inflight.started")), "request started", timeout=10)
        signal_at = time.monotonic()
        server.process.send_signal(sig)
        # The stalled client is answered 503 at once; the in-flight request
        # is still being worked on, so the server waits for it.
        stalled.settimeout(10)
        answer = read_answer(stalled, "PUT")
        assert answer.status == 503 and "shutting down" in answer.error["detail"]
        time.sleep(0.3)
        assert server.process.poll() is None, server.log()
        open(os.path.join(gates, "inflight"), "w").close()
        thread.join(15)
        code = stop(server, sig, timeout=15)
        print(f"\nstopped {time.monotonic() - signal_at:.2f} s after {signal.Signals(sig).name} "
              f"(0.3 s of it holding the in-flight request)")
        assert code == 0, server.log()
        assert len(results) == 1 and not isinstance(results[0], Exception), results
        assert results[0].status == 200 and results[0].body == b"released inflight"
        assert results[0].headers["connection"] == "close"
        assert closed_by_peer(idle, 5)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_idle_server_stops_at_once(tmp_path, sig):
    with toy_server("--workers", "2", gate_dir=str(tmp_path)) as server:
        time.sleep(0.5)
        began = time.monotonic()
        assert stop(server, sig, timeout=15) == 0, server.log()
        print(f"\nidle stop on {signal.Signals(sig).name}: {time.monotonic() - began:.2f} s")


def test_a_killed_worker_is_replaced(tmp_path):
    with toy_server("--workers", "2", gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        workers = wait_for(lambda: len(child_pids(server.process.pid)) == 2 and child_pids(server.process.pid),
                           "two workers", timeout=20)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        replaced = wait_for(lambda: (lambda now: len(now) == 2 and victim not in now and now)(
            child_pids(server.process.pid)), "a replacement worker", timeout=20)
        assert len(replaced - workers) == 1
        for i in range(10):
            assert exchange(port, f"GET /again/{i} HTTP/1.1\r\nHost: t\r\n\r\n".encode()).status == 200
        assert "SIGKILL" in server.log()
