"""One error hierarchy for the scheduler, mapped to HTTP in one handler.

Every refusal is a ``SchedulerError`` carrying its status and code; the
failures of lower layers (Placement, the API database) are named by
``errors.translate``; an unknown topology level in a request body is a 400
whichever front door the request came through."""
from __future__ import annotations

import pickle

import pytest
from sqlalchemy.exc import DataError, OperationalError

from billeting.common.db.tx import RetriesExhausted
from billeting.messaging import Bus
from billeting.placement_client.client import PlacementError
from billeting.placement_client.model import RequestGroup
from billeting.scheduler import errors
from billeting.scheduler.request import Nearness, ScheduleRequest
from billeting.scheduler.rpc import SchedulerClient, serve
from billeting.scheduler.service import hosts
from tests.scheduler.service.conftest import new_uuid


class _Orig(Exception):
    pass


@pytest.mark.parametrize("raised, status, code", [
    (errors.InvalidRequest("no"), 400, "billeting.invalid"),
    (errors.NotFound("no"), 404, "billeting.not_found"),
    (errors.Conflict("no"), 409, "billeting.in_use"),
    (errors.ConsumerConflict("no"), 409, "billeting.consumer_conflict"),
    (errors.PlacementTrouble("no"), 503, "billeting.placement_unavailable"),
    (errors.SchedulerError("no", status=422, code="billeting.mine"), 422, "billeting.mine"),
    (PlacementError(500, "boom"), 503, "billeting.placement_unavailable"),
    (RetriesExhausted("deadlock"), 409, "billeting.concurrent_update"),
    (DataError("INSERT", {}, _Orig("value too long")), 400, "billeting.invalid"),
    (OperationalError("SELECT", {}, _Orig("server has gone away")), 503, "billeting.database_unavailable"),
    (RuntimeError("a bug"), 500, "billeting.undefined_code"),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None)
def test_each_failure_is_one_error_document(api, monkeypatch, raised, status, code):
    def fail(service):
        raise raised

    monkeypatch.setattr(hosts, "list_hosts", fail)
    resp = api.get("/hosts")
    assert resp.status == status, resp
    (err,) = resp.json["errors"]
    assert err["code"] == code and err["status"] == status and err["request_id"].startswith("req-"), err
    if isinstance(raised, errors.SchedulerError):
        assert err["detail"] == "no"


def test_no_valid_host_carries_its_explanation(api, fleet):
    fleet.add("h1", vcpu=2)
    resp = api.post("/selections", json={"instance_uuids": [new_uuid()], "project_id": "p", "user_id": "u",
                                         "groups": [{"resources": {"VCPU": 16}}]})
    assert resp.status == 409, resp
    (err,) = resp.json["errors"]
    assert err["code"] == "billeting.no_valid_host" and err["explanation"]["hosts_total"] == 1, err
    assert err["detail"] == err["explanation"]["message"]


def test_no_valid_host_survives_a_process_boundary(service, fleet):
    """Pickled as a process pool sends it: a worker's NoValidHost must come
    back whole (a pool that cannot rebuild an exception hangs)."""
    fleet.add("h1", vcpu=2)
    request = ScheduleRequest(instance_uuids=(new_uuid(),), project_id="p", user_id="u",
                              groups=(RequestGroup(resources={"VCPU": 16}),))
    with pytest.raises(errors.NoValidHost) as raised:
        service.select(request, 0)
    again = pickle.loads(pickle.dumps(raised.value))
    assert type(again) is errors.NoValidHost
    assert again.explanation == raised.value.explanation and str(again) == str(raised.value)


def test_an_unknown_scope_of_a_server_group_is_400(api):
    resp = api.post("/server_groups", json={"name": "g", "policy": "anti-affinity", "scope": "galaxy"})
    assert resp.status == 400 and resp.error["code"] == "billeting.topology.unknown_level", resp


def _request(**extra) -> ScheduleRequest:
    return ScheduleRequest(instance_uuids=(new_uuid(),), project_id="p", user_id="u",
                           groups=(RequestGroup(resources={"VCPU": 1}),), **extra)


@pytest.mark.parametrize("near", [Nearness(level="galaxy", domain="r1"), Nearness(level="cell", domain="c")],
                         ids=["galaxy", "cell"])
def test_an_unknown_level_is_400_in_the_core_too(service, fleet, near):
    # Not a 409 NoValidHost: the request, not the fleet, is wrong.
    fleet.add("h1", vcpu=4)
    for call in (lambda: service.select(_request(near=near), 0), lambda: service.dry_run(_request(near=near))):
        with pytest.raises(errors.InvalidRequest) as caught:
            call()
        assert caught.value.status == 400 and caught.value.code == errors.UNKNOWN_LEVEL


def test_rpc_keeps_kind_status_and_code(bus_url, service, fleet):
    fleet.add("h1", vcpu=4)
    buses = [Bus(bus_url), Bus(bus_url)]
    try:
        serve(buses[0], service, threads=1)
        client = SchedulerClient(buses[1])
        with pytest.raises(errors.InvalidRequest) as caught:
            client.select_destinations(_request(near=Nearness(level="galaxy", domain="r1")), timeout=30)
        assert caught.value.status == 400 and caught.value.code == errors.UNKNOWN_LEVEL
        assert "unknown topology level 'galaxy'" in caught.value.detail
    finally:
        for bus in buses:
            bus.close()


def test_no_valid_host_is_a_scheduler_error():
    # Callers that catch SchedulerError (the conductors) see NoValidHost too.
    assert issubclass(errors.NoValidHost, errors.SchedulerError)
    assert errors.translate(KeyError("x")) is None
