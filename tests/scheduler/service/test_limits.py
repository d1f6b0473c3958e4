"""The scheduler API's bounds: a number beyond what Placement can ever hold
(2**31 - 1 of a class) or a guest can have (vCPUs) is a 400 naming the
bound, not a 409 "no valid host" after a Placement query (nor a second
of work per request for 10**6 vCPUs with ``hw:cpu_policy=mixed``); a
name one over its column is a 400 on every backend, at it accepted."""
from __future__ import annotations

import pytest

from billeting.placement.candidates import sql
from billeting.scheduler.bounds import MAX_AMOUNT, MAX_VCPUS
from tests.scheduler.service.conftest import new_uuid, simple_request


def test_the_bound_is_placements():
    assert MAX_AMOUNT == sql.MAX_AMOUNT


def _nova(**flavor) -> dict:
    return {"instance_uuids": [new_uuid()], "project_id": "p1", "user_id": "u1",
            "flavor": {"vcpus": 1, "memory_mb": 64, **flavor}}


MIXED = {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"}

# (what, the request for a number, the largest accepted, the bound the message names)
NUMBERS = [
    ("VCPU", lambda n: simple_request(vcpu=n), MAX_AMOUNT, MAX_AMOUNT),
    ("MEMORY_MB", lambda n: simple_request(memory_mb=n), MAX_AMOUNT, MAX_AMOUNT),
    ("flavor vcpus", lambda n: _nova(vcpus=n), MAX_VCPUS, MAX_VCPUS),
    ("flavor vcpus, mixed policy", lambda n: _nova(vcpus=n, extra_specs=MIXED), MAX_VCPUS, MAX_VCPUS),
    ("flavor memory_mb", lambda n: _nova(memory_mb=n), MAX_AMOUNT, MAX_AMOUNT),
    ("flavor root_gb", lambda n: _nova(root_gb=n), MAX_AMOUNT, MAX_AMOUNT),
    ("flavor ephemeral_gb", lambda n: _nova(ephemeral_gb=n), MAX_AMOUNT, MAX_AMOUNT),
    ("flavor swap", lambda n: _nova(swap=n), MAX_AMOUNT, MAX_AMOUNT),
    ("flavor root + ephemeral", lambda n: _nova(root_gb=MAX_AMOUNT - 10, ephemeral_gb=n), 10, MAX_AMOUNT),
    ("flavor extra spec amount", lambda n: _nova(extra_specs={"resources:VCPU": str(n)}), MAX_AMOUNT, MAX_AMOUNT),
    ("alternates", lambda n: simple_request(alternates=n), 100, 100),
    ("instances", lambda n: simple_request(*(new_uuid() for _ in range(n))), 1000, 1000),
]


@pytest.mark.parametrize("request_for, most, bound", [n[1:] for n in NUMBERS], ids=[n[0] for n in NUMBERS])
def test_a_number_beyond_its_bound_is_a_400_naming_it(api, fleet, request_for, most, bound):
    fleet.add("h1", vcpu=4)
    resp = api.post("/selections", json={**request_for(most + 1), "dry_run": True})
    assert resp.status == 400, resp
    assert str(bound) in resp.error["detail"], resp.error
    resp = api.post("/selections", json={**request_for(most), "dry_run": True})
    assert resp.status in (200, 409), resp  # taken (a host too small is "no valid host", not a bad request)


def test_a_request_at_the_largest_amount_is_placed(api, fleet):
    fleet.add("huge", vcpu=MAX_AMOUNT, memory_mb=MAX_AMOUNT)
    resp = api.post("/selections", json=simple_request(vcpu=MAX_AMOUNT, memory_mb=MAX_AMOUNT))
    assert resp.status == 201, resp
    resp = api.post("/selections", json=_nova(vcpus=MAX_VCPUS))
    assert resp.status == 409, resp  # (the host is full now: a request within bounds, on its way to Placement)


# (what, (method, path, body) for a name, the limit)
NAMES = [
    ("host name", lambda v: ("PUT", f"/hosts/{v}", {}), 255),
    ("host hypervisor_type", lambda v: ("PUT", "/hosts/h1", {"hypervisor_type": v}), 255),
    ("server group name", lambda v: ("POST", "/server_groups", {"name": v, "policy": "affinity"}), 255),
    ("server group project", lambda v: ("POST", "/server_groups", {"name": "g", "policy": "affinity",
                                                                   "project_id": v}), 255),
    ("zone name", lambda v: ("PUT", f"/availability_zones/{v}", {"hosts": []}), 255),
    ("aggregate metadata value", lambda v: ("PUT", "/aggregates/6b0f7a3c-1c1c-4d4d-8e8e-000000000001",
                                            {"metadata": {"k": v}}), 255),
    ("aggregate metadata key", lambda v: ("PUT", "/aggregates/6b0f7a3c-1c1c-4d4d-8e8e-000000000001",
                                          {"metadata": {v: "v"}}), 255),
    ("selection project", lambda v: ("POST", "/selections", {**simple_request(), "project_id": v}), 255),
]


@pytest.mark.parametrize("request_for, limit", [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_one_over_a_name_limit_is_a_400_and_the_limit_is_accepted(api, fleet, request_for, limit):
    fleet.add("h1", vcpu=4)
    method, path, body = request_for("x" * (limit + 1))
    resp = api.request(method, path, json=body)
    assert resp.status == 400, resp
    method, path, body = request_for("x" * limit)
    resp = api.request(method, path, json=body)
    assert resp.status in (200, 201), resp
