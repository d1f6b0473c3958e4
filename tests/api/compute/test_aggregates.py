"""``/os-aggregates``: Nova's host aggregates, their hosts in Placement, and
what the scheduler makes of them (zones)."""
from __future__ import annotations
from tests.support.wait import wait_for


OLD = {"OpenStack-API-Version": "compute 2.40"}


def _ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json


def _error(r, status: int) -> str:
    assert r.status_code == status, r.text
    (fault,) = r.json.values()
    assert fault["code"] == status
    return fault["message"]


def _members(p, aggregate_uuid: str) -> set[str]:
    """Host names Placement lists in the aggregate."""
    return {rp.name for rp in p.d.placement.list_providers(member_of=[aggregate_uuid])}


def test_an_aggregate_lives_as_in_nova_with_its_hosts_in_placement(plane_factory):
    p = plane_factory(computes=3)
    made = _ok(p.call("POST", "/v2.1/os-aggregates", {"aggregate": {"name": "fast", "availability_zone": "az1"}}))
    agg = made["aggregate"]
    # Nova's create answers without hosts and metadata.
    assert agg["name"] == "fast" and agg["availability_zone"] == "az1" and agg["deleted"] is False
    assert "hosts" not in agg and "metadata" not in agg and agg["uuid"]
    aid, uuid = agg["id"], agg["uuid"]
    assert isinstance(aid, int)
    assert "uuid" not in _ok(p.call("GET", f"/v2.1/os-aggregates/{aid}", headers=OLD))["aggregate"]  # from 2.41
    assert "already exists" in _error(p.call("POST", "/v2.1/os-aggregates", {"aggregate": {"name": "fast"}}), 409)

    added = _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"add_host": {"host": "host1"}}))["aggregate"]
    assert added["hosts"] == ["host1"] and added["metadata"] == {"availability_zone": "az1"}
    assert _members(p, uuid) == {"host1"}  # what the scheduler places by
    assert "already has host" in _error(
        p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"add_host": {"host": "host1"}}), 409)
    assert "could not be found" in _error(
        p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"add_host": {"host": "nowhere"}}), 404)

    # set_metadata merges: given keys set, null removes, others kept.
    _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"set_metadata": {"metadata": {"a": "1", "b": "2"}}}))
    meta = _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action",
                      {"set_metadata": {"metadata": {"a": None, "c": "3"}}}))["aggregate"]["metadata"]
    assert meta == {"availability_zone": "az1", "b": "2", "c": "3"}

    listed = _ok(p.call("GET", "/v2.1/os-aggregates"))["aggregates"]
    assert [(a["id"], a["name"], a["hosts"]) for a in listed] == [(aid, "fast", ["host1"])]

    renamed = _ok(p.call("PUT", f"/v2.1/os-aggregates/{aid}",
                         {"aggregate": {"name": "faster", "availability_zone": None}}))["aggregate"]
    assert renamed["name"] == "faster" and renamed["availability_zone"] is None
    assert renamed["metadata"] == {"b": "2", "c": "3"}

    # Nova keeps an aggregate with hosts.
    assert "not empty" in _error(p.call("DELETE", f"/v2.1/os-aggregates/{aid}"), 400)
    assert _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action",
                      {"remove_host": {"host": "host1"}}))["aggregate"]["hosts"] == []
    assert _members(p, uuid) == set()
    assert "has no host" in _error(
        p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"remove_host": {"host": "host1"}}), 404)
    deleted = p.call("DELETE", f"/v2.1/os-aggregates/{aid}")
    assert deleted.status_code == 200 and not deleted.content
    assert "could not be found" in _error(p.call("GET", f"/v2.1/os-aggregates/{aid}"), 404)
    assert _ok(p.call("GET", "/v2.1/os-aggregates"))["aggregates"] == []


def test_bad_aggregate_requests_are_refused_as_nova_does(plane_factory):
    p = plane_factory(computes=1)
    aid = _ok(p.call("POST", "/v2.1/os-aggregates", {"aggregate": {"name": "a"}}))["aggregate"]["id"]
    assert _error(p.call("GET", "/v2.1/os-aggregates", headers={"X-Auth-Token": "alice:p1"}), 403)
    assert _error(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"add_host": {"host": "host1"}},
                         headers={"X-Auth-Token": "alice:p1"}), 403)
    assert "must be an integer" in _error(p.call("GET", "/v2.1/os-aggregates/abc"), 400)
    assert _error(p.call("GET", "/v2.1/os-aggregates/99999999999"), 404)
    for body in ({"aggregate": {}}, {"aggregate": {"name": " padded"}}, {"aggregate": {"name": "x", "zone": "z"}},
                 {"aggregate": {"name": "x", "availability_zone": "a:b"}}, {"name": "x"}, []):
        _error(p.call("POST", "/v2.1/os-aggregates", body), 400)
    assert "internal" in _error(p.call("POST", "/v2.1/os-aggregates",
                                       {"aggregate": {"name": "x", "availability_zone": "internal"}}), 400)
    _error(p.call("PUT", f"/v2.1/os-aggregates/{aid}", {"aggregate": {}}), 400)
    for body in ({"frobnicate": {}}, {"add_host": {}, "remove_host": {}}, {"add_host": {"host": ""}},
                 {"add_host": "host1"}, {"set_metadata": {"metadata": {"bad key!": "v"}}},
                 {"set_metadata": {"metadata": {"k": "v" * 256}}}, {"set_metadata": {}}):
        _error(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", body), 400)
    # Nothing was written by any of them.
    (agg,) = _ok(p.call("GET", "/v2.1/os-aggregates"))["aggregates"]
    assert (agg["name"], agg["hosts"], agg["metadata"]) == ("a", [], {})


def test_a_host_is_in_one_zone_at_most(plane_factory):
    p = plane_factory(computes=2)

    def make(name: str, zone: str | None = None) -> int:
        return _ok(p.call("POST", "/v2.1/os-aggregates",
                          {"aggregate": {"name": name, "availability_zone": zone}}))["aggregate"]["id"]

    def act(aid: int, body: dict):
        return p.call("POST", f"/v2.1/os-aggregates/{aid}/action", body)

    az1, az2, plain = make("one", "az1"), make("two", "az2"), make("plain")
    _ok(act(az1, {"add_host": {"host": "host1"}}))
    assert "['az1']" in _error(act(az2, {"add_host": {"host": "host1"}}), 409)
    _ok(act(plain, {"add_host": {"host": "host1"}}))  # no zone of its own: fine
    # Giving the plain one a zone host1 is not in is refused, both ways of asking.
    assert "['az1']" in _error(act(plain, {"set_metadata": {"metadata": {"availability_zone": "az2"}}}), 400)
    assert "['az1']" in _error(p.call("PUT", f"/v2.1/os-aggregates/{plain}",
                                      {"aggregate": {"availability_zone": "az2"}}), 400)
    _ok(act(plain, {"set_metadata": {"metadata": {"availability_zone": "az1"}}}))  # the same zone: fine
    assert _members(p, _ok(p.call("GET", f"/v2.1/os-aggregates/{az2}"))["aggregate"]["uuid"]) == set()


def test_the_scheduler_places_servers_by_the_aggregates_zone(plane_factory):
    p = plane_factory(computes=3)
    aid = _ok(p.call("POST", "/v2.1/os-aggregates",
                     {"aggregate": {"name": "edge", "availability_zone": "edge-az"}}))["aggregate"]["id"]
    _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"add_host": {"host": "host2"}}))
    zones = {z["zoneName"]: z for z in _ok(p.call("GET", "/v2.1/os-availability-zone/detail"))["availabilityZoneInfo"]}
    assert set(zones["edge-az"]["hosts"]) == {"host2"} and "host2" not in zones["nova"]["hosts"]
    p.flavor()
    uuids = [p.boot(name=f"edge{i}", availability_zone="edge-az") for i in range(2)]
    for uuid in uuids:
        wait_for(lambda uuid=uuid: p.status(uuid) == "ACTIVE", what="ACTIVE")
        server = _ok(p.call("GET", f"/v2.1/servers/{uuid}"))["server"]
        assert (server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-AZ:availability_zone"]) == ("host2", "edge-az")


def test_zones_and_domains_of_the_scheduler_are_listed_and_kept(plane_factory):
    from billeting.scheduler.service import zones

    p = plane_factory(computes=2)
    zones.define(p.plane.scheduler, "az1", ["host1"])
    (zone,) = _ok(p.call("GET", "/v2.1/os-aggregates"))["aggregates"]
    assert (zone["name"], zone["availability_zone"], zone["hosts"]) == ("az1", "az1", ["host1"])
    zid = zone["id"]
    for method, path, body in (("DELETE", f"/v2.1/os-aggregates/{zid}", None),
                               ("PUT", f"/v2.1/os-aggregates/{zid}", {"aggregate": {"name": "other"}}),
                               ("POST", f"/v2.1/os-aggregates/{zid}/action", {"add_host": {"host": "host2"}}),
                               ("POST", f"/v2.1/os-aggregates/{zid}/action",
                                {"set_metadata": {"metadata": {"availability_zone": "az9"}}})):
        assert "scheduler's API" in _error(p.call(method, path, body), 400)
    # Other metadata may change.
    meta = _ok(p.call("POST", f"/v2.1/os-aggregates/{zid}/action",
                      {"set_metadata": {"metadata": {"ram_weight_multiplier": "2.0"}}}))["aggregate"]["metadata"]
    assert meta == {"availability_zone": "az1", "ram_weight_multiplier": "2.0"}
    # One name, one aggregate: Nova's names clash with the scheduler's.
    assert _error(p.call("POST", "/v2.1/os-aggregates", {"aggregate": {"name": "az1"}}), 409)


def test_flavors_go_to_the_aggregates_their_extra_specs_name(plane_factory):
    """The Nova way of steering a flavor: aggregate metadata + flavor extra
    specs, through AggregateInstanceExtraSpecsFilter (enabled by the operator)."""
    from billeting.scheduler import SchedulerSettings

    p = plane_factory(computes=3, scheduler_settings=SchedulerSettings(
        enabled_filters=("ComputeFilter", "AggregateInstanceExtraSpecsFilter")))
    aid = _ok(p.call("POST", "/v2.1/os-aggregates", {"aggregate": {"name": "fast"}}))["aggregate"]["id"]
    _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"add_host": {"host": "host3"}}))
    _ok(p.call("POST", f"/v2.1/os-aggregates/{aid}/action", {"set_metadata": {"metadata": {"ssd": "true"}}}))
    p.flavor(fid="db", name="db")
    r = p.call("POST", "/v2.1/flavors/db/os-extra_specs",
               {"extra_specs": {"aggregate_instance_extra_specs:ssd": "true"}})
    assert r.status_code == 200, r.text
    p.flavor()
    for i in range(3):
        uuid = p.boot(name=f"db{i}", flavor="db")
        wait_for(lambda uuid=uuid: p.status(uuid) == "ACTIVE", what="ACTIVE")
        assert _ok(p.call("GET", f"/v2.1/servers/{uuid}"))["server"]["OS-EXT-SRV-ATTR:host"] == "host3"
