"""The message bus: calls, casts, errors, competing servers and isolation
between messaging spaces, on kombu's memory transport and on RabbitMQ."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from billeting.messaging import Bus, BusUnavailable, CallTimeout, HandlerError, RemoteError


@pytest.fixture
def buses(bus_url):
    made = []

    def make(url=bus_url):
        bus = Bus(url)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        bus.close()


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_call_returns_the_handlers_payload(buses):
    server, client = buses(), buses()
    server.serve("echo", {"echo": lambda p: b'{"got":' + p + b"}"})
    assert client.call("echo", "echo", b"41", timeout=10) == b'{"got":41}'


def test_a_handler_error_reaches_the_caller_with_its_kind_and_payload(buses):
    server, client = buses(), buses()

    def refuse(_payload):
        raise HandlerError("NoValidHost", "nothing fits", b'{"hosts":0}')

    def crash(_payload):
        raise KeyError("oops")

    server.serve("svc", {"refuse": refuse, "crash": crash})
    with pytest.raises(RemoteError) as refused:
        client.call("svc", "refuse", timeout=10)
    assert (refused.value.kind, refused.value.message, refused.value.payload) == (
        "NoValidHost", "nothing fits", b'{"hosts":0}')
    with pytest.raises(RemoteError) as crashed:
        client.call("svc", "crash", timeout=10)
    assert crashed.value.kind == "KeyError"
    with pytest.raises(RemoteError) as unknown:
        client.call("svc", "nope", timeout=10)
    assert unknown.value.kind == "UnknownMethod"


def test_casts_reach_the_named_server_only(buses):
    bus = buses()
    got = {"h1": [], "h2": []}
    bus.serve("compute", {"build": lambda p: got["h1"].append(p)}, server="h1")
    bus.serve("compute", {"build": lambda p: got["h2"].append(p)}, server="h2")
    sender = buses()
    for i in range(3):
        sender.cast("compute", "build", str(i).encode(), server="h2")
    assert _wait(lambda: len(got["h2"]) == 3)
    assert got["h1"] == [] and got["h2"] == [b"0", b"1", b"2"]


def test_servers_of_one_topic_share_its_messages(buses):
    handled: dict[str, int] = {"a": 0, "b": 0}
    lock = threading.Lock()

    def handler(name):
        def handle(_payload):
            with lock:
                handled[name] += 1
            time.sleep(0.01)
            return b"null"
        return handle

    buses().serve("scheduler", {"select": handler("a")})
    buses().serve("scheduler", {"select": handler("b")})
    client = buses()
    results = []

    def caller():
        for _ in range(10):
            results.append(client.call("scheduler", "select", timeout=20))

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 40
    assert handled["a"] + handled["b"] == 40
    assert handled["a"] > 0 and handled["b"] > 0


def test_a_call_nobody_serves_times_out(buses):
    with pytest.raises(CallTimeout):
        buses().call(f"nobody-{uuid.uuid4().hex[:6]}", "x", timeout=0.5)


def test_two_spaces_cannot_see_each_other(bus_url, buses):
    """A cell's bus cannot reach the API's services, even with the same topic."""
    api = buses(bus_url)
    api.serve("scheduler", {"select": lambda p: b'"api"'})
    if bus_url.startswith("memory"):
        cell_url = f"memory:///cell-{uuid.uuid4().hex[:6]}"
    else:
        cell_url = bus_url.rsplit("/", 1)[0] + "/" + "no-such-vhost-" + uuid.uuid4().hex[:6]
    if bus_url.startswith("memory"):
        cell = buses(cell_url)
        with pytest.raises(CallTimeout):
            cell.call("scheduler", "select", timeout=0.5)
    else:
        # A vhost the cell was not given does not even accept the connection.
        cell = buses(cell_url)
        with pytest.raises(BusUnavailable):
            cell.call("scheduler", "select", timeout=2)


@pytest.mark.parametrize("ack_early", [True, False])
def test_calls_and_casts_survive_the_broker_dropping_every_connection(amqp_vhost_factory, ack_early):
    """RabbitMQ closing connections (a restart, a failover, an operator's
    `close_all_connections`): servers reconnect and serve again, senders
    reconnect and deliver; nothing needs restarting."""
    from tests.conftest import _rabbitmqctl

    url = amqp_vhost_factory()
    vhost = url.rsplit("/", 1)[1]
    server, client = Bus(url), Bus(url)
    try:
        got = []
        server.serve("svc", {"echo": lambda p: p, "note": lambda p: got.append(p)}, ack_early=ack_early)
        assert client.call("svc", "echo", b"1", timeout=10) == b"1"
        _rabbitmqctl("close_all_connections", "-p", vhost, "test: the broker drops everyone")
        # The first attempts may meet the dropped connection: each call either
        # answers or fails cleanly, and within a few seconds calls answer again.
        deadline, answered = time.monotonic() + 30, False
        while time.monotonic() < deadline and not answered:
            try:
                answered = client.call("svc", "echo", b"2", timeout=3) == b"2"
            except (CallTimeout, BusUnavailable):
                time.sleep(0.2)
        assert answered, "no call answered within 30 s of the broker dropping the connections"
        client.cast("svc", "note", b"\"after\"")
        assert _wait(lambda: got == [b"\"after\""], timeout=15), got
    finally:
        server.close()
        client.close()
