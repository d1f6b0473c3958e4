"""Claims in flight (``billeting.scheduler.inflight``): recorded while a
request is decided, gone once it is answered, and released by a sweep when
the request's scheduler stopped renewing them."""
from __future__ import annotations

import socket
import struct
import threading
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select, update

from billeting.apidb.tables import claims_in_flight
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler.api.app import make_app
from billeting.scheduler.inflight import ClaimsReleased, InFlight, _now
from billeting.scheduler.service.runtime import SchedulerService
from billeting.scheduler.settings import SchedulerSettings
from billeting.serving.in_thread import ThreadedServer
from billeting.serving.options import ServeOptions
from tests.conftest import PlacementClient as WsgiClient
from tests.scheduler.service.conftest import new_uuid, simple_request
from tests.support.wait import wait_for

GRACE_S = 30.0


@pytest.fixture
def recorded(placement, apidb, fleet):
    """A scheduler service whose front doors record claims in flight, its HTTP API, two hosts."""
    fleet.add("h1", vcpu=4)
    fleet.add("h2", vcpu=4)
    inflight = InFlight(apidb, placement, grace_s=GRACE_S, owner="test:1")
    service = SchedulerService(placement, apidb, SchedulerSettings(catalog_refresh_s=0.0), inflight=inflight)
    return service, WsgiClient(make_app(service))


def _records(engine) -> dict[str, str]:
    with engine.connect() as conn:
        return dict(conn.execute(select(claims_in_flight.c.instance_uuid, claims_in_flight.c.owner)).all())


def _age(engine, instance: str, seconds: float) -> None:
    with engine.begin() as conn:
        conn.execute(update(claims_in_flight).where(claims_in_flight.c.instance_uuid == instance)
                     .values(renewed_at=_now() - timedelta(seconds=seconds)))


def _swept_total() -> float:
    return REGISTRY.get_sample_value("billeting_scheduler_orphaned_claims_swept_total") or 0.0


def _claim_and_die(service: SchedulerService, instance: str, owner: str) -> None:
    """What a scheduler killed after claiming leaves: a record and a claim, nothing renewing it."""
    dead = InFlight(service.engine, service.client, grace_s=GRACE_S, owner=owner)
    dead.begin([instance])
    service.scheduler.select_destinations(_typed(instance))


def _typed(instance: str):
    from billeting.placement_client.model import RequestGroup
    from billeting.scheduler import ScheduleRequest

    return ScheduleRequest(instance_uuids=(instance,), project_id="p1", user_id="u1",
                           groups=(RequestGroup(resources={"VCPU": 1, "MEMORY_MB": 512}),))


def test_a_stale_record_is_swept_with_its_claims_a_fresh_one_is_not(recorded, placement, apidb):
    service, _ = recorded
    old, fresh = new_uuid(), new_uuid()
    _claim_and_die(service, old, "gone:1")
    _claim_and_die(service, fresh, "gone:2")
    _age(apidb, old, GRACE_S + 5)
    before = _swept_total()
    assert service.inflight.sweep() == 1
    assert placement.get_allocations(old).allocations == {}
    assert placement.get_allocations(fresh).allocations != {}
    assert _records(apidb) == {fresh: "gone:2"}
    assert _swept_total() == before + 1


def test_a_stale_record_without_claims_goes_and_counts_nothing(recorded, apidb):
    service, _ = recorded
    instance = new_uuid()
    InFlight(apidb, service.client, owner="gone:1").begin([instance])  # killed before it claimed
    _age(apidb, instance, GRACE_S + 5)
    before = _swept_total()
    assert service.inflight.sweep() == 0
    assert _records(apidb) == {} and _swept_total() == before


def test_a_renewed_record_is_not_swept(recorded, placement, apidb):
    service, _ = recorded
    instance = new_uuid()
    request_id = service.inflight.begin([instance])  # this process's request, still being decided
    other = InFlight(apidb, placement, grace_s=GRACE_S, owner="other:1")
    _age(apidb, instance, GRACE_S + 5)
    service.inflight.renew()
    assert other.sweep() == 0 and _records(apidb) == {instance: "test:1"}
    _age(apidb, instance, GRACE_S + 5)
    assert service.inflight.sweep() == 0, "a process never sweeps a request it is deciding"
    service.inflight._end(request_id)
    assert _records(apidb) == {}


def test_an_answered_request_leaves_no_record_and_keeps_its_claim(recorded, placement, apidb):
    service, api = recorded
    instance = new_uuid()
    resp = api.post("/selections", json=simple_request(instance))
    assert resp.status == 201, resp
    assert _records(apidb) == {}
    assert service.inflight.sweep(now=_now() + timedelta(seconds=10 * GRACE_S)) == 0
    assert placement.get_allocations(instance).allocations != {}


def test_an_error_answer_leaves_no_record(recorded, apidb):
    _, api = recorded
    resp = api.post("/selections", json=simple_request(vcpu=64))
    assert resp.status == 409 and resp.error["code"] == "billeting.no_valid_host", resp
    assert _records(apidb) == {}


def test_an_instance_in_flight_is_refused_until_its_orphaned_claims_are_swept(recorded, placement, apidb):
    service, api = recorded
    instance = new_uuid()
    _claim_and_die(service, instance, "gone:1")
    resp = api.post("/selections", json=simple_request(instance))
    assert resp.status == 409 and resp.error["code"] == "billeting.consumer_conflict", resp
    assert "in another request being scheduled" in resp.error["detail"]
    assert _records(apidb) == {instance: "gone:1"}  # the refused request never touched it
    _age(apidb, instance, GRACE_S + 5)
    assert service.inflight.sweep() == 1
    resp = api.post("/selections", json=simple_request(instance))
    assert resp.status == 201, resp
    assert placement.get_allocations(instance).allocations != {}


@pytest.mark.parametrize("swept", ["after the claim", "before the claim"])
def test_a_request_whose_record_was_swept_meanwhile_is_not_answered_with_selections(recorded, apidb, swept):
    service, _ = recorded
    instance = new_uuid()
    sweeper = InFlight(apidb, service.client, grace_s=GRACE_S, owner="other:1")

    def sweep_as_if_stale():
        # This process could not renew for a grace period; another swept.
        sweeper.sweep(now=_now() + timedelta(seconds=GRACE_S + 5))

    def decide():
        if swept == "before the claim":
            sweep_as_if_stale()
        service.scheduler.select_destinations(_typed(instance))
        if swept == "after the claim":
            sweep_as_if_stale()
        return "selections"

    with pytest.raises(ClaimsReleased):
        service.inflight.run([instance], decide)
    assert service.client.get_allocations(instance).allocations == {}


def test_the_rpc_front_door_records_and_forgets(recorded, apidb):
    from billeting.messaging import Bus
    from billeting.scheduler import rpc

    service, _ = recorded
    bus = Bus("memory://inflight")
    server = rpc.serve(bus, service, threads=1)
    try:
        instance = new_uuid()
        (line,) = rpc.SchedulerClient(bus).select_destinations(_typed(instance), timeout=10)
        assert line[0].consumer_uuid == instance and _records(apidb) == {}
        InFlight(apidb, service.client, owner="gone:1").begin([instance := new_uuid()])
        from billeting.scheduler import ConsumerConflict

        with pytest.raises(ConsumerConflict):
            rpc.SchedulerClient(bus).select_destinations(_typed(instance), timeout=10)
        assert _records(apidb) == {instance: "gone:1"}
    finally:
        server.stop()
        bus.close()


class _HeldClaims(InProcessPlacementClient):
    """Claims wait until the test lets them go."""

    def __init__(self, engine, settings) -> None:
        super().__init__(engine, settings)
        self.waiting = threading.Event()
        self.go = threading.Event()
        self.claimed = threading.Event()

    def put_allocations(self, consumer_uuid, write, *, version=None):
        self.waiting.set()
        assert self.go.wait(10)
        outcome = super().put_allocations(consumer_uuid, write, version=version)
        if outcome.ok:
            self.claimed.set()
        return outcome


def test_claims_whose_answer_the_client_left_before_are_released(engine, settings, apidb, fleet):
    fleet.add("h1", vcpu=4)
    client = _HeldClaims(engine, settings)
    inflight = InFlight(apidb, client, grace_s=GRACE_S)
    service = SchedulerService(client, apidb, SchedulerSettings(catalog_refresh_s=0.0, coalesce_requests=False),
                               inflight=inflight)
    server = ThreadedServer(make_app(service), ServeOptions(host="127.0.0.1", port=0, threads=2))
    try:
        instance = new_uuid()
        import orjson

        body = orjson.dumps(simple_request(instance))
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            # Closed with a reset (as by a client killed or timing out hard): the server learns it is gone.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(b"POST /selections HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
                         b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            assert client.waiting.wait(10)
        wait_for(lambda: not server.connections, "the server saw the client leave", timeout=10)
        client.go.set()
        assert client.claimed.wait(10)
        wait_for(lambda: client.get_allocations(instance).allocations == {}, "the claim released", timeout=10)
        assert _records(apidb) == {}
    finally:
        client.go.set()
        server.stop()
