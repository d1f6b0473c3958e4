"""Kept-alive connections spread over the workers even when they were all
made while only one worker was serving (a sibling still loading the
application, or being replaced after a crash).

New connections are balanced when they are accepted; kept-alive ones would
stay where they landed for as long as their clients live. A worker holding
two more than an accepting sibling closes one after answering on it
(``Connection: close``), and the client's next connection lands on the
sibling. Real processes: ``tests.serving.toy_server`` with two workers."""
from __future__ import annotations

import http.client
import os
import signal
import time
from collections import Counter

import pytest

from billeting.serving.balance import STALE_S
from tests.serving.rawhttp import child_pids, port_of, toy_server
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

CLIENTS = 6


def _ask(conn: http.client.HTTPConnection) -> tuple[int, str | None]:
    """(the answering worker's pid, the answer's Connection header)."""
    conn.request("GET", "/who")
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200
    return int(resp.getheader("X-Worker-Pid")), resp.getheader("Connection")


def test_connections_made_while_a_sibling_was_away_spread_once_it_is_back(tmp_path):
    with toy_server("--workers", "2", "--keepalive-timeout", "60", gate_dir=str(tmp_path)) as server:
        port = port_of(server)
        workers = wait_for(lambda: len(child_pids(server.process.pid)) == 2 and child_pids(server.process.pid),
                           "two workers", timeout=20)
        away = min(workers)
        (serving,) = workers - {away}
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=15) for _ in range(CLIENTS)]
        os.kill(away, signal.SIGSTOP)
        try:
            time.sleep(STALE_S + 0.5)  # its heartbeat is stale: nothing is left to it
            first = [_ask(conn)[0] for conn in conns]
        finally:
            os.kill(away, signal.SIGCONT)
        assert set(first) == {serving}

        # Back: the same clients, asking again and again, end up half on each.
        # A round whose answers all kept their connections open shows where
        # the clients are now; each client that moved needed one answer with
        # "Connection: close".
        even = Counter({away: CLIENTS // 2, serving: CLIENTS // 2})
        rounds, shed = 0, 0
        deadline = time.monotonic() + 20
        while True:
            answers = [_ask(conn) for conn in conns]
            rounds += 1
            closed = sum(connection == "close" for _, connection in answers)
            shed += closed
            now = Counter(pid for pid, _ in answers)
            if not closed and now == even:
                break
            assert time.monotonic() < deadline, f"still {dict(now)} after {rounds} rounds"
            time.sleep(0.02)
        print(f"\nspread over both workers after {rounds} rounds, {shed} connections shed")
        assert shed >= CLIENTS // 2

        # Even: nothing more is closed.
        for _ in range(30):
            for conn in conns:
                pid, connection = _ask(conn)
                assert connection != "close", pid
        for conn in conns:
            conn.close()


def test_a_single_worker_never_sheds(tmp_path):
    with toy_server("--workers", "1", gate_dir=str(tmp_path)) as server:
        conns = [http.client.HTTPConnection("127.0.0.1", port_of(server), timeout=15) for _ in range(4)]
        for _ in range(20):
            for conn in conns:
                assert _ask(conn)[1] != "close"
        for conn in conns:
            conn.close()


# --- the rules, one process ------------------------------------------------------

def _hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [environ["PATH_INFO"].encode()]


@pytest.fixture
def always_shedding():
    """The in-thread front with a host that would always shed: what the
    connection itself decides (only a connection its client has sent nothing
    more on is closed) is then all that is left."""
    from billeting.serving.in_thread import ThreadedServer
    from billeting.serving.options import ServeOptions

    server = ThreadedServer(_hello, ServeOptions(host="127.0.0.1", port=0, threads=2))
    server.sheds_one = lambda: True
    try:
        yield int(server.url.rsplit(":", 1)[1])
    finally:
        server.stop(10)


def test_a_shed_connection_is_answered_with_connection_close_then_closed(always_shedding):
    from tests.serving.rawhttp import closed_by_peer, connect, read_answer

    sock = connect(always_shedding)
    sock.sendall(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
    answer = read_answer(sock)
    assert answer.status == 200 and answer.body == b"/one"
    assert answer.headers["connection"] == "close"
    assert closed_by_peer(sock, 5)


def test_pipelined_requests_are_all_answered_before_a_shed(always_shedding):
    from tests.serving.rawhttp import closed_by_peer, connect, read_answer

    sock = connect(always_shedding)
    sock.sendall(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
    first, second = read_answer(sock), read_answer(sock)
    assert (first.body, second.body) == (b"/a", b"/b")
    assert first.headers.get("connection") != "close"  # /b was already waiting on it
    assert second.headers["connection"] == "close"
    assert closed_by_peer(sock, 5)


def _worker(mine: int, sibling: int, *, workers: int = 2):
    """A LoopWorker with just what ``sheds_one`` reads, holding ``mine``
    connections beside a sibling publishing ``sibling`` (-1: not accepting)."""
    import asyncio

    from billeting.serving.balance import ConnectionBoard
    from billeting.serving.worker import LoopWorker

    worker = object.__new__(LoopWorker)
    worker.loop = asyncio.new_event_loop()
    worker.stopping = False
    worker.multiprocess = workers > 1
    worker.connections = set(range(mine))
    worker.adopting = 0
    worker.shed_after = 0.0
    worker.board = ConnectionBoard(2)
    worker.board_slot = worker.board.claim()
    worker.board.publish(worker.board_slot, 1, mine)
    other = worker.board.claim()
    worker.board.publish(other, 2, sibling)
    return worker


@pytest.mark.parametrize("mine, sibling, sheds", [
    (6, 0, True), (3, 1, True), (2, 0, True),
    (3, 2, False), (2, 1, False), (1, 0, False), (0, 0, False),
    (6, -1, False),  # a sibling with every thread busy takes nothing
])
def test_a_worker_sheds_only_for_a_sibling_two_behind(mine, sibling, sheds):
    worker = _worker(mine, sibling)
    try:
        assert worker.sheds_one() is sheds
    finally:
        worker.loop.close()


def test_sheds_are_spaced_and_never_when_stopping_or_alone():
    from billeting.serving.worker import SHED_EVERY_S

    worker = _worker(6, 0)
    try:
        assert worker.sheds_one()
        assert not worker.sheds_one()  # at most one per SHED_EVERY_S
        worker.shed_after -= SHED_EVERY_S
        worker.stopping = True
        assert not worker.sheds_one()
    finally:
        worker.loop.close()
    alone = _worker(6, 0, workers=1)
    try:
        assert not alone.sheds_one()
    finally:
        alone.loop.close()


def test_a_connection_idle_as_long_as_a_clients_poll_interval_is_still_open():
    """The openstack CLI's ``--wait`` polls every 5 s on one kept-alive
    connection: with a 5 s keep-alive timeout the server closed it just as
    the next poll went out (a reset, seen on a loaded CI machine). The
    default outlasts such intervals."""
    from billeting.serving.in_thread import ThreadedServer
    from billeting.serving.options import ServeOptions
    from tests.serving.rawhttp import connect, read_answer

    options = ServeOptions(host="127.0.0.1", port=0, threads=2)
    assert options.keepalive_timeout >= 60
    server = ThreadedServer(_hello, options)
    try:
        with connect(int(server.url.rsplit(":", 1)[1])) as sock:
            for path in (b"/first", b"/after-a-poll-interval"):
                sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n")
                answer = read_answer(sock)
                assert answer.status == 200 and answer.body == path
                assert answer.headers.get("connection") != "close"
                if path == b"/first":
                    time.sleep(5.5)
    finally:
        server.stop(10)
