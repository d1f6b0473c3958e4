"""POST /selections: placing, dry runs, explanations, bad bodies, auth and policy."""
from __future__ import annotations

import pytest

from tests.scheduler.service.conftest import new_uuid, simple_request


@pytest.fixture
def two_hosts(fleet):
    fleet.add("h1", vcpu=4)
    fleet.add("h2", vcpu=4)
    return fleet


def test_placing_claims_in_placement_and_answers_201_with_selections(api, two_hosts, placement):
    inst = new_uuid()
    resp = api.post("/selections", json=simple_request(inst, alternates=1))
    assert resp.status == 201, resp
    assert resp.headers["x-openstack-request-id"].startswith("req-")
    (line,) = resp.json["selections"]
    chosen, alternate = line
    assert chosen["claimed"] is True and alternate["claimed"] is False
    assert chosen["consumer_uuid"] == inst and {chosen["nodename"], alternate["nodename"]} == {"h1", "h2"}
    held = placement.get_allocations(inst).allocations
    assert set(held) == {chosen["compute_node_uuid"]}
    assert held[chosen["compute_node_uuid"]].resources == {"VCPU": 1, "MEMORY_MB": 512}


def test_no_valid_host_is_409_with_an_explanation(api, two_hosts):
    resp = api.post("/selections", json=simple_request(vcpu=64))
    assert resp.status == 409, resp
    err = resp.error
    assert err["code"] == "billeting.no_valid_host"
    assert err["explanation"]["hosts_total"] == 2 and err["explanation"]["hosts_offered"] == 0
    assert "2 had no 64 vCPUs free" in err["detail"]
    assert err["request_id"] == resp.headers["x-openstack-request-id"]


def test_required_and_member_of_take_lone_names_beside_any_of_lists(api, two_hosts, placement):
    """["A", ["B", "C"]] means A and (B or C): a lone name needs no list of its own."""
    placement.ensure_trait("CUSTOM_FAST")
    h1 = two_hosts.uuids["h1"]
    assert placement.put_traits(h1, ["CUSTOM_FAST"], placement.get_traits(h1).resource_provider_generation).ok
    aggregate = new_uuid()
    two_hosts.join("h1", aggregate)

    def placed_on(group: dict) -> str:
        resp = api.post("/selections", json={**simple_request(), "groups": [
            {"resources": {"VCPU": 1}, **group}]})
        assert resp.status == 201, resp
        return resp.json["selections"][0][0]["nodename"]

    # h1 (4 vCPUs) is the only host with the trait and in the aggregate
    assert placed_on({"required": ["CUSTOM_FAST"]}) == "h1"
    assert placed_on({"required": ["CUSTOM_FAST", ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]]}) == "h1"
    assert placed_on({"member_of": [aggregate]}) == "h1"
    resp = api.post("/selections", json={**simple_request(), "groups": [
        {"resources": {"VCPU": 1}, "required": ["HW_CPU_X86_AVX2"]}]})
    assert resp.status == 409 and "2 lacked trait HW_CPU_X86_AVX2" in resp.error["detail"], resp
    resp = api.post("/selections", json={**simple_request(), "groups": [
        {"resources": {"VCPU": 1}, "required": [["lower_case"]]}]})
    assert resp.status == 400, resp


def test_dry_run_ranks_with_scores_and_claims_nothing(api, two_hosts, placement):
    inst = new_uuid()
    resp = api.post("/selections", json=simple_request(inst, dry_run=True))
    assert resp.status == 200, resp
    hosts = resp.json["hosts"]
    assert {h["host"] for h in hosts} == {"h1", "h2"}
    assert "RAMWeigher" in hosts[0]["scores"]
    assert placement.get_allocations(inst).allocations == {}


def test_a_dry_run_every_host_is_filtered_from_is_no_valid_host(api, two_hosts):
    # Placement offers both hosts; the filters remove both (found by the fuzz test: a 500)
    resp = api.post("/selections", json=simple_request(dry_run=True, ignore_hosts=["h1", "h2"]))
    assert resp.status == 409 and resp.error["code"] == "billeting.no_valid_host", resp


def test_nova_form_is_translated(api, two_hosts, placement):
    inst = new_uuid()
    resp = api.post("/selections", json={
        "instance_uuids": [inst], "flavor": {"vcpus": 2, "memory_mb": 1024, "root_gb": 10},
        "image": {"properties": {}}})
    assert resp.status == 201, resp
    rp = resp.json["selections"][0][0]["compute_node_uuid"]
    assert placement.get_allocations(inst).allocations[rp].resources == {"VCPU": 2, "MEMORY_MB": 1024,
                                                                         "DISK_GB": 10}
    # project and user come from the caller's token (noauth2 "admin" -> project "admin")
    assert placement.get_allocations(inst).project_id == "admin"


def test_nova_form_takes_failure_domain_hints(api, fleet):
    for name in ("h1", "h2", "h3", "h4"):
        fleet.add(name, vcpu=4)
    assert api.put("/topology/rack/r1", json={"hosts": ["h1", "h2"]}).status == 201
    assert api.put("/topology/rack/r2", json={"hosts": ["h3", "h4"]}).status == 201
    rack = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}

    def place(hints: dict) -> str:
        inst = new_uuid()
        resp = api.post("/selections", json={"instance_uuids": [inst], "flavor": {"vcpus": 1, "memory_mb": 64},
                                             "scheduler_hints": hints})
        assert resp.status == 201, resp
        return inst, resp.json["selections"][0][0]["nodename"]

    first, host = place({})
    for _ in range(3):
        assert rack[place({"different_rack": [first]})[1]] != rack[host]
        assert rack[place({"same_rack": [first]})[1]] == rack[host]
        assert rack[place({"near_rack": ["r2"]})[1]] == "r2"
    resp = api.post("/selections", json={"instance_uuids": [new_uuid()], "flavor": {"vcpus": 1, "memory_mb": 64},
                                         "scheduler_hints": {"near_rack": ["r9"]}})
    assert resp.status == 400 and "no rack named 'r9'" in resp.error["detail"], resp


def test_nova_form_refuses_what_the_scheduler_does_not_model(api, two_hosts, placement):
    inst = new_uuid()
    resp = api.post("/selections", json={
        "instance_uuids": [inst], "flavor": {"name": "numa", "vcpus": 2, "memory_mb": 1024,
                                             "extra_specs": {"hw:numa_nodes": "2"}}})
    assert resp.status == 400, resp
    assert "flavor numa asks for hw:numa_nodes" in resp.error["detail"], resp
    assert placement.get_allocations(inst).allocations == {}


@pytest.mark.parametrize("body, text", [
    ({"groups": [{"resources": {"VCPU": 1}}]}, "'instance_uuids' is a required property"),
    (simple_request(alternates=-1), "-1 is less than the minimum of 0"),
    (simple_request(bogus=1), "Additional properties are not allowed"),
    ({**simple_request(), "instance_uuids": ["not-a-uuid"]}, "is not a 'uuid'"),
    ({**simple_request(), "groups": [{"resources": {"vcpu": 1}}]}, "does not match any of the regexes"),
    ({"instance_uuids": [new_uuid()], "flavor": {"vcpus": 0, "memory_mb": 1}}, "0 is less than the minimum of 1"),
])
def test_bad_bodies_are_400(api, two_hosts, body, text):
    resp = api.post("/selections", json=body)
    assert resp.status == 400, resp
    assert text in resp.error["detail"] and resp.error["code"] == "billeting.undefined_code"


def test_not_json_is_400_or_415(api):
    assert api.post("/selections", body=b"{", content_type="application/json").status == 400
    assert api.post("/selections", body=b"x", content_type="text/plain").status == 415


def test_a_claim_for_an_existing_consumer_is_a_409(api, two_hosts):
    inst = new_uuid()
    assert api.post("/selections", json=simple_request(inst)).status == 201
    resp = api.post("/selections", json=simple_request(inst))
    assert resp.status == 409 and resp.error["code"] == "billeting.consumer_conflict"


def test_auth_and_policy(api_as, two_hosts):
    body = simple_request()
    anonymous = api_as(None).post("/selections", json=body)
    # in this API's own error document, not the auth layer's
    assert anonymous.status == 401 and anonymous.error["code"] == "billeting.undefined_code"
    assert anonymous.error["detail"] == "The request you have made requires authentication."
    assert anonymous.error["request_id"] == anonymous.headers["x-openstack-request-id"]
    denied = api_as("alice:p1").post("/selections", json=body)
    assert denied.status == 403 and "scheduler:selections:create" in denied.error["detail"]
    service = api_as("nova:service")
    resp = service.request("POST", "/selections", json=body, headers={"X-Roles": "service"})
    assert resp.status == 201, resp
    assert api_as(None).get("/").status == 200


def test_unknown_paths_and_methods(api):
    assert api.get("/nope").status == 404
    resp = api.delete("/selections")
    assert resp.status == 405 and resp.headers["allow"] == "POST"
    assert resp.error["detail"] == "The method DELETE is not allowed for this resource."


def test_a_server_group_given_whole_is_used_as_is(api, two_hosts):
    first = new_uuid()
    resp = api.post("/selections", json=simple_request(first))
    host = resp.json["selections"][0][0]["nodename"]
    group = {"uuid": new_uuid(), "policy": "anti-affinity", "members": [first]}
    for _ in range(3):
        again = api.post("/selections", json=simple_request(server_group=group))
        assert again.status == 201 and again.json["selections"][0][0]["nodename"] != host


def test_an_unavailable_api_database_is_503(placement, fleet):
    from billeting.common.db.engine import make_engine
    from billeting.scheduler.api.app import make_app
    from billeting.scheduler.service.runtime import SchedulerService
    from tests.conftest import PlacementClient as WsgiClient

    broken = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    api = WsgiClient(make_app(SchedulerService(placement, broken)))
    resp = api.get("/topology")
    assert resp.status == 503 and resp.error["code"] == "billeting.database_unavailable"


def test_both_forms_carry_the_image_disk_format_and_boot_from_volume(placement, apidb, fleet):
    """Request filter 3 over HTTP: the Nova form's image.disk_format and the
    typed form's image_disk_format reach the query; is_bfv lifts it."""
    from billeting.scheduler.api.app import make_app
    from billeting.scheduler.service.runtime import SchedulerService
    from billeting.scheduler.settings import SchedulerSettings
    from tests.conftest import PlacementClient as WsgiClient

    fleet.add("raw-only", memory_mb=65536)
    qcow2 = fleet.add("qcow2")
    assert placement.put_traits(qcow2, ["COMPUTE_IMAGE_TYPE_QCOW2"], placement.get_traits(qcow2)
                                .resource_provider_generation).ok
    service = SchedulerService(placement, apidb, SchedulerSettings(
        catalog_refresh_s=0.0, query_placement_for_image_type_support=True))
    api = WsgiClient(make_app(service))

    def hosts(body: dict) -> set[str]:
        resp = api.post("/selections", json={"instance_uuids": [new_uuid()], "dry_run": True, **body})
        assert resp.status == 200, resp
        return {h["host"] for h in resp.json["hosts"]}

    flavor = {"vcpus": 1, "memory_mb": 512}
    assert hosts({"flavor": flavor, "image": {"disk_format": "qcow2"}}) == {"qcow2"}
    assert hosts({"flavor": flavor, "image": {"disk_format": "qcow2"}, "is_bfv": True}) == {"qcow2", "raw-only"}
    typed = simple_request(image_disk_format="qcow2")
    del typed["instance_uuids"]
    assert hosts(typed) == {"qcow2"}
    assert hosts({**typed, "is_bfv": True}) == {"qcow2", "raw-only"}
    resp = api.post("/selections", json={"instance_uuids": [new_uuid()], "flavor": flavor,
                                         "image": {"disk_format": "vhd"}})
    assert resp.status == 409 and "lacked trait COMPUTE_IMAGE_TYPE_VHD" in resp.error["detail"], resp
    resp = api.post("/selections", json={"instance_uuids": [new_uuid()], "flavor": flavor,
                                         "image": {"disk_format": ""}})
    assert resp.status == 400, resp
