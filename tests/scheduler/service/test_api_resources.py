"""The scheduler API's other resources: topology, zones, aggregates, server
groups and host reports (success, 4xx, policy), checked through Placement."""
from __future__ import annotations

import pytest

from tests.scheduler.service.conftest import new_uuid, simple_request


@pytest.fixture
def four_hosts(fleet):
    for i in range(1, 5):
        fleet.add(f"h{i}", vcpu=4)
    return fleet


def test_topology_calls(api, four_hosts):
    resp = api.put("/topology/rack/r1", json={"hosts": ["h1", "h2"]})
    assert resp.status == 201, resp
    r1 = resp.json
    assert r1["hosts"] == ["h1", "h2"] and four_hosts.aggregates("h1") == {r1["aggregate"]}
    assert api.put("/topology/rack/r1", json={"hosts": ["h1"]}).status == 200
    assert four_hosts.aggregates("h2") == set()
    assert api.put("/topology/rack/r2", json={"hosts": ["h3"]}).status == 201
    row = api.put("/topology/row/w1", json={"members": ["r1", "r2"]})
    assert row.status == 201 and row.json["hosts"] == ["h1", "h3"]
    listed = api.get("/topology").json
    assert listed["levels"] == ["rack", "row", "room", "cell"]
    assert [(d["level"], d["name"]) for d in listed["domains"]] == [("rack", "r1"), ("rack", "r2"), ("row", "w1")]
    assert [d["name"] for d in api.get("/topology/rack").json["domains"]] == ["r1", "r2"]
    assert api.get("/topology/rack/r1").json["parent"] == "w1"
    assert api.delete("/topology/row/w1").status == 204
    assert api.get("/topology/row/w1").status == 404


@pytest.mark.parametrize("path, body, status, code", [
    ("/topology/shelf/x", {"hosts": ["h1"]}, 404, "billeting.topology.unknown_level"),
    ("/topology/rack/x", {"hosts": ["h9"]}, 400, "billeting.unknown_host"),
    ("/topology/row/x", {"hosts": ["h1"]}, 400, "billeting.topology.wrong_level"),
    ("/topology/row/x", {"members": ["r9"]}, 400, "billeting.topology.wrong_level"),
    ("/topology/rack/x", {"hosts": ["h1"], "members": ["r1"]}, 400, "billeting.undefined_code"),
    ("/topology/rack/x", {}, 400, "billeting.undefined_code"),
    ("/topology/rack/x", {"hosts": []}, 400, "billeting.undefined_code"),
    ("/topology/rack/x%20y", {"hosts": ["h1"]}, 400, "billeting.invalid"),
])
def test_topology_refusals(api, four_hosts, path, body, status, code):
    resp = api.put(path, json=body)
    assert resp.status == status, resp
    assert resp.error["code"] == code


def test_topology_conflicts(api, four_hosts):
    assert api.put("/topology/rack/r1", json={"hosts": ["h1"]}).status == 201
    taken = api.put("/topology/rack/r2", json={"hosts": ["h1"]})
    assert taken.status == 409 and taken.error["code"] == "billeting.host_taken"
    clash = api.put("/availability_zones/r1", json={"hosts": ["h2"]})
    assert clash.status == 409 and clash.error["code"] == "billeting.name_clash"
    assert api.put("/topology/row/w1", json={"members": ["r1"]}).status == 201
    held = api.delete("/topology/rack/r1")
    assert held.status == 409 and "member of the row w1" in held.error["detail"]


def test_topology_policy(api_as, four_hosts):
    reader = api_as("alice:p1")
    assert reader.put("/topology/rack/r1", json={"hosts": ["h1"]}).status == 403
    assert reader.get("/topology").status == 403
    resp = reader.request("GET", "/topology", headers={"X-Roles": "reader"})
    assert resp.status == 200


def test_zones_named_only_by_aggregate_metadata_are_listed_too(api, four_hosts):
    """A zone made elsewhere (aggregate metadata, e.g. the compute API's
    os-aggregates) is a zone the scheduler places by: it is listed and shown,
    with its hosts, and removed by removing the metadata, not here."""
    import uuid as uuidlib

    own = api.put("/availability_zones/az1", json={"hosts": ["h1"]}).json
    agg = str(uuidlib.uuid4())
    four_hosts.join("h2", agg)
    assert api.put(f"/aggregates/{agg}", json={"name": "edge-racks", "metadata": {"availability_zone": "edge"}}
                   ).status == 201
    other = str(uuidlib.uuid4())
    four_hosts.join("h3", other)
    assert api.put(f"/aggregates/{other}", json={"metadata": {"availability_zone": "az1"}}).status == 201
    listed = {z["name"]: z for z in api.get("/availability_zones").json["availability_zones"]}
    assert set(listed) == {"az1", "edge"}
    assert listed["edge"]["hosts"] == ["h2"] and listed["edge"]["defined_here"] is False
    assert listed["edge"]["aggregates"] == [agg] and listed["edge"]["aggregate"] == agg
    # A zone defined here that metadata also names: both aggregates, every host.
    assert listed["az1"]["hosts"] == ["h1", "h3"] and listed["az1"]["aggregate"] == own["aggregate"]
    assert sorted(listed["az1"]["aggregates"]) == sorted([own["aggregate"], other])
    assert api.get("/availability_zones/edge").json["hosts"] == ["h2"]
    refused = api.delete("/availability_zones/edge")
    assert refused.status == 409 and "edge-racks" in refused.error["detail"], refused
    assert api.put(f"/aggregates/{agg}", json={"metadata": {}}).status == 200
    assert api.get("/availability_zones/edge").status == 404


def test_availability_zones_steer_requests(api, four_hosts):
    zone = api.put("/availability_zones/az1", json={"hosts": ["h2", "h3"]})
    assert zone.status == 201 and zone.json["hosts"] == ["h2", "h3"]
    assert four_hosts.aggregates("h2") == {zone.json["aggregate"]}
    assert api.get("/availability_zones").json["availability_zones"][0]["name"] == "az1"
    taken = api.put("/availability_zones/az2", json={"hosts": ["h3"]})
    assert taken.status == 409 and taken.error["code"] == "billeting.host_taken"
    for _ in range(4):
        resp = api.post("/selections", json=simple_request(availability_zone="az1"))
        assert resp.status == 201, resp
        chosen = resp.json["selections"][0][0]
        assert chosen["nodename"] in ("h2", "h3") and chosen["availability_zone"] == "az1"
    metadata = api.get(f"/aggregates/{zone.json['aggregate']}").json["metadata"]
    assert metadata == {"availability_zone": "az1"}
    assert api.delete("/availability_zones/az1").status == 204
    assert four_hosts.aggregates("h2") == set() and api.get("/availability_zones/az1").status == 404


def test_aggregate_metadata_isolates_tenants(api, four_hosts, placement, apidb):
    from billeting.scheduler.api.app import make_app
    from billeting.scheduler.service.runtime import SchedulerService
    from billeting.scheduler.settings import SchedulerSettings
    from tests.conftest import PlacementClient as WsgiClient

    agg = new_uuid()
    for name in ("h1", "h2"):
        current = placement.get_aggregates(four_hosts.uuids[name])
        assert placement.put_aggregates(four_hosts.uuids[name], [agg], current.resource_provider_generation).ok
    resp = api.put(f"/aggregates/{agg}", json={"metadata": {"filter_tenant_id": "p-blue"}, "name": "blue"})
    assert resp.status == 201 and resp.json["kind"] == "plain"
    isolating = WsgiClient(make_app(SchedulerService(placement, apidb, SchedulerSettings(
        catalog_refresh_s=0.0, limit_tenants_to_placement_aggregate=True))))
    for _ in range(3):
        resp = isolating.post("/selections", json={**simple_request(), "project_id": "p-blue"})
        assert resp.status == 201 and resp.json["selections"][0][0]["nodename"] in ("h1", "h2")
    bad = api.put(f"/aggregates/{agg}", json={"metadata": {"bad key": "x"}})
    assert bad.status == 400
    assert api.get("/aggregates/not-a-uuid").status == 404
    assert api.delete(f"/aggregates/{agg}").status == 204
    assert api.get(f"/aggregates/{agg}").status == 404


def test_server_group_calls(api, api_as):
    created = api.post("/server_groups", json={"name": "web", "policy": "anti-affinity",
                                               "rules": {"max_server_per_host": 2}, "scope": "rack"})
    assert created.status == 201, created
    group = created.json
    assert group["rules"] == {"max_server_per_host": 2} and group["scope"] == "rack"
    assert group["project_id"] == "admin" and group["members"] == []
    assert api.get(f"/server_groups/{group['uuid']}").json == group
    assert [g["uuid"] for g in api.get("/server_groups?project_id=admin").json["server_groups"]] == [group["uuid"]]
    assert api.get("/server_groups?project_id=other").json["server_groups"] == []
    assert api.get("/server_groups?bogus=1").status == 400
    assert api_as("alice:p1").get("/server_groups").status == 403
    assert api.delete(f"/server_groups/{group['uuid']}").status == 204
    assert api.get(f"/server_groups/{group['uuid']}").status == 404
    assert api.delete(f"/server_groups/{group['uuid']}").status == 404


@pytest.mark.parametrize("body, text", [
    ({"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 2}}, "only the anti-affinity"),
    ({"name": "g", "policy": "anti-affinity", "scope": "shelf"}, "unknown scope 'shelf'"),
    ({"name": "g", "policy": "spread"}, "is not one of"),
    ({"policy": "affinity"}, "'name' is a required property"),
])
def test_server_group_refusals(api, body, text):
    resp = api.post("/server_groups", json=body)
    assert resp.status == 400 and text in resp.error["detail"], resp


def test_selections_record_group_members_and_keep_the_policy(api, four_hosts):
    group = api.post("/server_groups", json={"name": "g", "policy": "anti-affinity"}).json
    placed = []
    for _ in range(4):
        inst = new_uuid()
        resp = api.post("/selections", json=simple_request(inst, server_group=group["uuid"]))
        assert resp.status == 201, resp
        placed.append(resp.json["selections"][0][0]["nodename"])
    assert sorted(placed) == ["h1", "h2", "h3", "h4"]
    members = api.get(f"/server_groups/{group['uuid']}").json["members"]
    assert len(members) == 4
    full = api.post("/selections", json=simple_request(server_group=group["uuid"]))
    assert full.status == 409 and "anti-affinity" in full.error["detail"]
    assert len(api.get(f"/server_groups/{group['uuid']}").json["members"]) == 4
    other = api.post("/server_groups", json={"name": "g2", "policy": "affinity"}).json
    moved = api.post("/selections", json=simple_request(members[0], server_group=other["uuid"]))
    assert moved.status == 409 and moved.error["code"] == "billeting.server_group.conflict"
    missing = api.post("/selections", json=simple_request(server_group=new_uuid()))
    assert missing.status == 404


def test_host_reports(api, four_hosts):
    resp = api.put("/hosts/h1", json={"enabled": False, "cell": "c9", "heartbeat": True, "failed_builds": 2})
    assert resp.status == 201, resp
    assert resp.json["up"] is True and resp.json["cell"] == "c9"
    shown = api.get("/hosts/h1").json
    assert shown["record"]["enabled"] is False and shown["record"]["cell_uuid"] == "c9"
    assert shown["record"]["failed_builds"] == 2
    for _ in range(3):  # a disabled host is never chosen
        assert api.post("/selections", json=simple_request()).json["selections"][0][0]["nodename"] != "h1"
    assert api.put("/hosts/h1", json={"enabled": True}).status == 200
    assert api.get("/hosts/h1").json.get("enabled") is True
    assert [h["name"] for h in api.get("/hosts").json["hosts"]] == ["h1"]
    assert api.put("/hosts/h1", json={"num_io_ops": -1}).status == 400
    assert api.put("/hosts/h1", json={"colour": "red"}).status == 400
    assert api.delete("/hosts/h1").status == 204
    assert api.get("/hosts/h1").status == 404


@pytest.mark.parametrize("method, path, body", [
    ("PUT", "/availability_zones/az1", {"hosts": []}),
    ("DELETE", "/availability_zones/az1", None),
    ("PUT", "/aggregates/8c1b8ad0-5b6e-4c47-9f3f-7d2bd2b0b7aa", {"metadata": {}}),
    ("GET", "/aggregates", None),
    ("DELETE", "/topology/rack/r1", None),
    ("PUT", "/hosts/h1", {}),
    ("GET", "/hosts", None),
    ("DELETE", "/hosts/h1", None),
    ("POST", "/server_groups", {"name": "g", "policy": "affinity"}),
    ("DELETE", "/server_groups/8c1b8ad0-5b6e-4c47-9f3f-7d2bd2b0b7aa", None),
])
def test_a_user_without_roles_is_refused_everywhere(api_as, method, path, body):
    user = api_as("alice:p1")
    resp = user.request(method, path, json=body)
    assert resp.status == 403, resp
    assert resp.error["detail"].startswith("Policy does not allow scheduler:")
    assert api_as(None).request(method, path, json=body).status == 401


def test_a_service_may_report_hosts_but_not_change_the_topology(api_as, four_hosts):
    svc = api_as("nova:service")
    roles = {"X-Roles": "service"}
    assert svc.request("PUT", "/hosts/h1", json={"heartbeat": True}, headers=roles).status == 201
    assert svc.request("PUT", "/topology/rack/r1", json={"hosts": ["h1"]}, headers=roles).status == 403
