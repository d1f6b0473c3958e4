"""What a careless or hostile client sends the scheduler API: a 4xx in the
API's error document, never a 500, on every backend (PostgreSQL refuses a
NUL in text; server databases' INT columns hold 32 bits)."""
from __future__ import annotations

import pytest

from tests.scheduler.service.conftest import new_uuid, simple_request

NUL = "a\u0000b"


@pytest.mark.parametrize("method, path", [
    ("GET", "/server_groups/%00"),
    ("DELETE", "/server_groups/%00"),
    ("GET", "/topology/rack/%00"),
    ("DELETE", "/topology/rack/%00"),
    ("GET", "/topology/%00"),
    ("GET", "/hosts/%00"),
    ("DELETE", "/hosts/%00"),
    ("GET", "/availability_zones/%00"),
    ("GET", "/aggregates/%00"),
], ids=lambda v: str(v))
def test_a_nul_in_a_path_is_a_4xx(api, method, path):
    resp = api.request(method, path)
    assert 400 <= resp.status < 500, resp
    assert resp.error["code"].startswith("billeting.")


@pytest.mark.parametrize("query", ["project_id=%00", "%00=1", "all_projects=%00"], ids=str)
def test_a_nul_in_a_query_is_a_400(api, query):
    resp = api.get(f"/server_groups?{query}")
    assert resp.status == 400, resp


@pytest.mark.parametrize("path, body", [
    ("/server_groups", {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2**31}}),
    ("/server_groups", {"name": "g" * 10000, "policy": "affinity"}),
    ("/server_groups", {"name": "g", "policy": "affinity", "members": [NUL]}),
    ("/selections", simple_request(alternates=2**40)),
    ("/selections", {**simple_request(), "instance_uuids": ["not-a-uuid"]}),
    ("/selections", {**simple_request(), "hints": {NUL: NUL}}),
    ("/selections", {**simple_request(), "availability_zone": NUL}),
    ("/selections", {**simple_request(), "server_group": NUL}),
    ("/selections", {**simple_request(), "ignore_hosts": [NUL]}),
], ids=lambda v: str(v)[:50] if isinstance(v, str) else None)
def test_bad_bodies_are_400(api, fleet, path, body):
    fleet.add("h1", vcpu=4)
    resp = api.post(path, json=body)
    assert resp.status == 400, resp


# (beyond Placement's largest amount, 2**31 - 1, a request is a 400: tests/scheduler/service/test_limits.py)
@pytest.mark.parametrize("body", [simple_request(vcpu=2**31 - 1), simple_request(memory_mb=2**31 - 1)],
                         ids=["vcpu", "memory_mb"])
def test_an_amount_no_host_has_is_no_valid_host(api, fleet, body):
    fleet.add("h1", vcpu=4)
    resp = api.post("/selections", json=body)
    assert resp.status == 409 and resp.error["code"] == "billeting.no_valid_host", resp


@pytest.mark.parametrize("field", ["failed_builds", "num_instances", "num_io_ops"])
def test_host_report_counts_beyond_32_bits_are_400(api, field):
    assert api.put("/hosts/h1", json={field: 2**31}).status == 400
    assert api.put("/hosts/h1", json={field: 2**31 - 1}).status in (200, 201)


def test_a_repeated_query_parameter_is_not_a_500(api):
    resp = api.get("/server_groups?project_id=a&project_id=b")
    assert resp.status in (200, 400), resp


def test_one_instance_in_two_spellings_is_claimed_once(api, fleet):
    """The schema takes a uuid in upper case, without dashes or in braces, but
    Placement keeps a consumer as written: each spelling was claimed anew."""
    fleet.add("h1", vcpu=4)
    inst = new_uuid()
    resp = api.post("/selections", json=simple_request(inst.upper()))
    assert resp.status == 201, resp
    assert resp.json["selections"][0][0]["consumer_uuid"] == inst
    for written in (inst, inst.replace("-", ""), "{" + inst + "}"):
        resp = api.post("/selections", json=simple_request(written))
        assert resp.status == 409 and resp.error["code"] == "billeting.consumer_conflict", (written, resp)
    resp = api.post("/selections", json=simple_request(new_uuid(), vcpu=4))
    assert resp.status == 409 and resp.error["code"] == "billeting.no_valid_host", resp  # 3 vCPUs left
    twice = new_uuid()
    resp = api.post("/selections", json=simple_request(twice, twice.upper()))
    assert resp.status == 400 and "twice" in resp.error["detail"], resp


def test_a_group_and_its_members_in_upper_case_are_the_same_group(api, fleet):
    fleet.add("h1", vcpu=4)
    fleet.add("h2", vcpu=4)
    group = api.post("/server_groups", json={"name": "g", "policy": "anti-affinity"}).json["uuid"]
    first, second = new_uuid(), new_uuid()
    hosts = []
    for inst in (first, second):
        resp = api.post("/selections", json=simple_request(inst.upper(), server_group=group.upper()))
        assert resp.status == 201, resp
        hosts.append(resp.json["selections"][0][0]["nodename"])
    assert sorted(hosts) == ["h1", "h2"]
    assert sorted(api.get(f"/server_groups/{group}").json["members"]) == sorted([first, second])
    resp = api.post("/selections", json=simple_request(same_host=[first.upper().replace("-", "")]))
    assert resp.status == 201 and resp.json["selections"][0][0]["nodename"] == hosts[0], resp


@pytest.mark.parametrize("extra, code", [
    ({"near": {"level": "galaxy", "domain": "r1"}}, "billeting.topology.unknown_level"),
    ({"near": {"level": "cell", "domain": "r1"}}, "billeting.topology.unknown_level"),
    ({"near": {"level": "rack", "domain": "nope"}}, "billeting.invalid"),
    ({"domain_constraints": [{"relation": "different", "level": "galaxy", "instances": [new_uuid()]}]},
     "billeting.topology.unknown_level"),
], ids=["near-level", "near-cell", "near-domain", "constraint-level"])
def test_an_unknown_level_or_domain_in_a_request_is_400_as_in_the_nova_form(api, fleet, extra, code):
    """The Nova form's near_rack/different_galaxy hints were checked (400), the
    same in the typed form was a 409 no_valid_host, or (a "different" domain
    constraint) no constraint at all and a claim."""
    fleet.add("h1", vcpu=4)
    assert api.put("/topology/rack/r1", json={"hosts": ["h1"]}).status == 201
    resp = api.post("/selections", json=simple_request(**extra))
    assert resp.status == 400 and resp.error["code"] == code, resp
    assert api.post("/selections", json=simple_request(near={"level": "rack", "domain": "r1"})).status == 201


def test_no_zone_is_named_internal_or_nothing(api, fleet):
    """The compute API keeps "internal" for its conductors (and refuses it for
    its aggregates): a host put in such a zone through this API was listed as
    one of them. An empty zone name could not be asked for at all."""
    fleet.add("h1", vcpu=4)
    resp = api.put("/availability_zones/internal", json={"hosts": ["h1"]})
    assert resp.status == 400 and resp.error["code"] == "billeting.invalid", resp
    for zone in ("internal", ""):
        resp = api.put(f"/aggregates/{new_uuid()}", json={"metadata": {"availability_zone": zone}})
        assert resp.status == 400 and resp.error["code"] == "billeting.invalid", (zone, resp)
    assert api.get("/availability_zones").json["availability_zones"] == []
    assert api.get("/aggregates").json["aggregates"] == []


def test_a_deleted_group_then_a_request_naming_it_is_a_404_not_500(api, fleet):
    fleet.add("h1", vcpu=4)
    group = api.post("/server_groups", json={"name": "g", "policy": "anti-affinity"}).json["uuid"]
    assert api.delete(f"/server_groups/{group}").status == 204
    resp = api.post("/selections", json=simple_request(new_uuid(), server_group=group))
    assert resp.status in (400, 404), resp


def test_a_name_with_edge_spaces_in_a_path_is_a_404_on_every_backend(api):
    # MariaDB would find host "h1" for "h1 " (trailing spaces ignored in comparisons)
    assert api.put("/hosts/h1", json={"enabled": True}).status in (200, 201)
    for method, path in (("GET", "/hosts/h1%20"), ("PUT", "/hosts/h1%20"), ("DELETE", "/hosts/%20h1"),
                         ("GET", "/topology/rack/r1%20")):
        resp = api.request(method, path, json={} if method == "PUT" else None)
        assert resp.status == 404, (method, path, resp)
    assert api.get("/hosts/h1").status == 200


@pytest.mark.parametrize("path, body", [
    ("/server_groups", {"name": "g", "policy": "affinity", "project_id": "p "}),
    ("/server_groups", {"name": " g", "policy": "affinity"}),
    ("/availability_zones/z1", {"hosts": ["h1 "]}),
    ("/topology/rack/r1", {"hosts": ["\th1"]}),
])
def test_names_with_edge_spaces_in_bodies_are_400(api, path, body):
    resp = api.post(path, json=body) if path == "/server_groups" else api.put(path, json=body)
    assert resp.status == 400, resp


def test_a_project_query_with_edge_spaces_is_400(api):
    assert api.get("/server_groups?project_id=p%20").status == 400


def test_a_refused_body_is_not_echoed_back_whole(api, fleet):
    """A 20,000-instance request (ten times the limit) is refused in a few
    lines naming what failed and where, not with its own ~900 KB quoted."""
    fleet.add("h1", vcpu=4)
    body = {**simple_request(), "instance_uuids": [new_uuid() for _ in range(20_000)]}
    resp = api.post("/selections", json=body)
    assert resp.status == 400, resp
    detail = resp.error["detail"]
    assert len(detail) < 1000 and "instance_uuids" in detail, detail


@pytest.mark.parametrize("token", ["alice :p1", "alice: p1", "u" * 256 + ":p1", "alice:" + "p" * 256])
def test_an_implausible_identity_is_401(api, token):
    """No identity has edge spaces (MariaDB would take "alice " for "alice") or
    is longer than the columns that keep a server group's owner."""
    resp = api.request("POST", "/server_groups", json={"name": "g", "policy": "affinity"},
                       token=token, headers={"X-Roles": "admin"})
    assert resp.status == 401, resp


def test_a_value_the_database_cannot_keep_is_a_400_not_an_outage(api, service, monkeypatch):
    """PostgreSQL and MariaDB refuse a value longer than its column (a
    DataError): the request's fault, not a 503 telling the client to retry."""
    from sqlalchemy.exc import DataError

    from billeting.scheduler.service import groups

    def too_long(*_a, **_kw):
        raise DataError("INSERT INTO server_groups ...", {},
                        Exception("value too long for type character varying(255)"))

    monkeypatch.setattr(groups, "create", too_long)
    resp = api.post("/server_groups", json={"name": "g", "policy": "affinity"})
    assert resp.status == 400 and resp.error["code"] == "billeting.invalid", resp


def _nested(depth: int, inner: bytes) -> bytes:
    return b"[" * depth + inner + b"]" * depth


@pytest.mark.parametrize("depth", [255, 300, 1024, 10000])
@pytest.mark.parametrize("inner", [b"1", b'"a\\u0000b"'], ids=["int", "nul"])
def test_a_deeply_nested_body_is_a_400_with_a_code(api, fleet, depth, inner):
    fleet.add("h1", vcpu=4)
    bodies = [
        ("POST", "/selections", b'{"instance_uuids": ["%s"], "project_id": "p", "user_id": "u", '
                                b'"groups": [{"resources": {"VCPU": 1}, "required": %%s}]}' % new_uuid().encode()),
        ("POST", "/server_groups", b'{"name": "g", "policy": "affinity", "rules": %s}'),
        ("PUT", "/hosts/h1", b'{"num_instances": %s}'),
        ("PUT", "/topology/rack/r1", b"%s"),
        ("PUT", "/availability_zones/z1", b'{"hosts": %s}'),
    ]
    for method, path, template in bodies:
        resp = api.request(method, path, body=template % _nested(depth, inner), content_type="application/json")
        assert resp.status == 400, (method, path, resp)
        assert resp.error["code"] == "billeting.undefined_code", (method, path, resp)
        if depth < 1000:  # deeper, orjson refuses it while parsing
            assert "levels deep" in resp.error["detail"], (method, path, resp)


def test_a_legitimate_nested_request_still_places(api, fleet):
    fleet.add("h1", vcpu=4)
    body = simple_request()
    body["groups"][0]["forbidden"] = ["COMPUTE_STATUS_DISABLED"]
    resp = api.post("/selections", json=body)
    assert resp.status == 201, resp
