"""API → super conductor → scheduler → cell → compute, through the compute API."""
from __future__ import annotations

import time
import uuid as uuidlib

from billeting.apidb import build_requests, cell_mappings, instance_mappings
from billeting.cells import instances as inst
from tests.support.wait import wait_for


def test_a_server_is_built_in_its_cell_and_deleted(plane_factory):
    p = plane_factory(cells=("cell1", "cell2"), computes=2)
    p.flavor()
    uuid = p.boot()
    wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
    mapping = instance_mappings.get(p.api_engine, uuid)
    assert mapping.cell in ("cell1", "cell2")
    assert build_requests.get(p.api_engine, uuid) is None
    record = inst.get(p.cells.engine_of(mapping.cell), uuid)
    assert record.host is not None
    wait_for(lambda: cell_mappings.cell_of_host(p.api_engine, record.host) == mapping.cell,
             what="the host mapped to its cell")  # discovered automatically
    body = p.call("GET", f"/v2.1/servers/{uuid}").json["server"]
    assert body["OS-EXT-SRV-ATTR:host"] == record.host and body["flavor"]["vcpus"] == 2
    assert p.call("DELETE", f"/v2.1/servers/{uuid}").status_code == 204
    wait_for(lambda: p.call("GET", f"/v2.1/servers/{uuid}").status_code == 404, what="deleted")
    assert not p.d.placement.get_allocations(uuid).allocations
    actions = p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions").json["instanceActions"]
    assert {a["action"] for a in actions} == {"create", "delete"}


def test_no_valid_host_buries_the_instance_in_cell0_with_the_explanation(plane_factory):
    p = plane_factory()
    p.flavor(fid="big", name="big", ram=10_000_000)
    uuid = p.boot(flavor="big")
    wait_for(lambda: p.status(uuid) == "ERROR", what="ERROR")
    assert instance_mappings.get(p.api_engine, uuid).cell == "cell0"
    fault = p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["fault"]
    assert fault["code"] == 500 and "No valid host" in fault["message"] and "memory" in fault["message"]
    assert p.call("DELETE", f"/v2.1/servers/{uuid}").status_code == 204
    wait_for(lambda: p.call("GET", f"/v2.1/servers/{uuid}").status_code == 404, what="deleted from cell0")


def test_a_listing_shows_each_servers_newest_fault_in_one_read_per_cell(plane_factory, monkeypatch):
    p = plane_factory()
    p.flavor(fid="big", name="big", ram=10_000_000)
    first, second = p.boot(name="a", flavor="big"), p.boot(name="b", flavor="big")
    wait_for(lambda: p.status(first) == "ERROR" and p.status(second) == "ERROR", what="ERROR")
    cell0 = p.cells.engine_of("cell0")
    inst.add_fault(cell0, second, inst.Fault(code=409, message="a later fault"))
    reads = []
    monkeypatch.setattr(inst, "latest_fault", lambda *a: reads.append(a))  # the one-by-one read: unused
    listed = {s["id"]: s for s in p.call("GET", "/v2.1/servers/detail").json["servers"]}
    assert "No valid host" in listed[first]["fault"]["message"]
    assert listed[second]["fault"]["message"] == "a later fault" and listed[second]["fault"]["code"] == 409
    assert reads == []


def test_listings_page_newest_first_and_build_only_their_page(plane_factory, monkeypatch):
    from billeting.api.compute import views

    p = plane_factory()
    p.flavor()
    booted = [p.boot(name=f"vm{i}") for i in range(5)]
    # (listed in their final state, instance records rather than build requests)
    wait_for(lambda: all(p.status(b) == "ACTIVE" for b in booted), what="ACTIVE")
    # Newest first (servers created within the same second: by id, as every page agrees)
    newest_first = [s["id"] for s in p.call("GET", "/v2.1/servers").json["servers"]]
    assert sorted(newest_first) == sorted(booted)
    name_of = {s["id"]: s["name"] for s in p.call("GET", "/v2.1/servers").json["servers"]}

    built = []
    real = views.ServerBodies.detail
    monkeypatch.setattr(views.ServerBodies, "detail", lambda *a, **k: built.append(1) or real(*a, **k))
    first = p.call("GET", "/v2.1/servers?limit=2").json
    assert [s["id"] for s in first["servers"]] == newest_first[:2]
    assert built == []  # the index shows what the listing's rows hold: no detail body is built
    assert len(p.call("GET", "/v2.1/servers/detail?limit=2").json["servers"]) == 2
    assert len(built) == 2  # only the page's bodies (the row after it only tells that a next page exists)
    assert first["servers_links"][0]["href"].endswith(f"/v2.1/servers?limit=2&marker={newest_first[1]}")
    second = p.call("GET", f"/v2.1/servers/detail?limit=2&marker={newest_first[1]}").json
    assert [s["id"] for s in second["servers"]] == newest_first[2:4]
    assert "servers_links" in second
    last = p.call("GET", f"/v2.1/servers?limit=2&marker={newest_first[3]}").json
    assert [s["id"] for s in last["servers"]] == newest_first[4:] and "servers_links" not in last
    # Filters apply before the page is cut, and the marker is looked up among what they keep.
    kept = [i for i in newest_first if name_of[i] in ("vm0", "vm2", "vm4")]
    named = p.call("GET", "/v2.1/servers?name=vm%5B024%5D&limit=2").json  # vm[024]
    assert [s["id"] for s in named["servers"]] == kept[:2]
    # Its next link keeps the filter: following it gives the same listing's next page.
    href = named["servers_links"][0]["href"]
    following = p.call("GET", href[href.index("/v2.1/"):]).json
    assert [s["id"] for s in following["servers"]] == kept[2:] and "servers_links" not in following
    after = p.call("GET", f"/v2.1/servers?name=vm%5B024%5D&marker={kept[1]}").json
    assert [s["id"] for s in after["servers"]] == kept[2:]
    resp = p.call("GET", f"/v2.1/servers?name=vm%5B024%5D&marker={booted[1]}")  # vm1: filtered out
    assert resp.status_code == 400 and "marker" in resp.json["badRequest"]["message"]
    assert p.call("GET", "/v2.1/servers?limit=0").json["servers"] == []
    assert p.call("GET", "/v2.1/servers?limit=-1").status_code == 400


def test_a_server_keeps_the_creation_time_the_api_gave_it(plane_factory, monkeypatch):
    """Nova's "created" is when the API accepted the server; the cell that
    records it later (or cell0, burying it) keeps that time."""
    import datetime
    import time

    from billeting.conductor import super_conductor

    real = super_conductor.SuperConductor._schedule_and_build

    def slow(self, plan):
        time.sleep(1.2)  # a busy scheduler: the cell records the instance well after the POST
        return real(self, plan)

    monkeypatch.setattr(super_conductor.SuperConductor, "_schedule_and_build", slow)
    p = plane_factory()
    p.flavor()
    p.flavor(fid="big", name="big", ram=10_000_000)
    built, buried = p.boot(name="ok"), p.boot(name="nowhere", flavor="big")
    accepted_by = datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0)
    wait_for(lambda: p.status(built) == "ACTIVE" and p.status(buried) == "ERROR", what="ACTIVE and ERROR")
    for server in (built, buried):
        created = p.call("GET", f"/v2.1/servers/{server}").json["server"]["created"]
        assert datetime.datetime.fromisoformat(created.removesuffix("Z")) <= accepted_by, (server, created)


def test_flavor_listings_page_like_nova(plane_factory):
    p = plane_factory()
    for i in range(3):
        p.flavor(fid=str(i + 1), name=f"f{i + 1}", ram=1024 * (i + 1))
    everything = [f["id"] for f in p.call("GET", "/v2.1/flavors").json["flavors"]]
    first = p.call("GET", "/v2.1/flavors/detail?minRam=2048&limit=1").json
    kept = [f for f in everything if f != "1"]
    assert [f["id"] for f in first["flavors"]] == kept[:1]
    href = first["flavors_links"][0]["href"]
    assert "minRam=2048" in href  # the filter stays on the next page
    following = p.call("GET", href[href.index("/v2.1/"):]).json
    assert [f["id"] for f in following["flavors"]] == kept[1:] and "flavors_links" not in following
    assert p.call("GET", "/v2.1/flavors?limit=-1").status_code == 400
    assert p.call("GET", "/v2.1/flavors?limit=x").status_code == 400


def test_a_multi_instance_request_is_one_scheduler_request(plane_factory):
    p = plane_factory(computes=2)
    p.flavor()
    calls = []
    real = p.plane.scheduler.select
    p.plane.conductor.scheduler = type("Spy", (), {
        "select": lambda self, req, alt=0, *, group=None: calls.append((len(req.instance_uuids), alt)) or
        real(req, alt, group=group), "client": p.d.placement})()
    p.boot(name="many", min_count=3, max_count=3)
    servers = wait_for(lambda: (lambda s: s if len(s) == 3 and all(x["status"] == "ACTIVE" for x in s) else None)(
        p.call("GET", "/v2.1/servers/detail").json["servers"]), what="3 ACTIVE")
    assert sorted(s["name"] for s in servers) == ["many-1", "many-2", "many-3"]
    assert calls == [(3, 2)]  # build_attempts 3 → 2 alternates, in one call


def test_a_disabled_compute_is_not_chosen(plane_factory):
    p = plane_factory(computes=2)
    p.flavor()
    services = p.call("GET", "/v2.1/os-services").json["services"]
    host1 = next(s for s in services if s["host"] == "host1")
    r = p.call("PUT", f"/v2.1/os-services/{host1['id']}", {"status": "disabled", "disabled_reason": "maint"})
    assert r.status_code == 200 and r.json["service"]["status"] == "disabled", r.text
    for i in range(4):
        uuid = p.boot(name=f"vm{i}")
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
        assert p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["OS-EXT-SRV-ATTR:host"] == "host2"
    hyps = p.call("GET", "/v2.1/os-hypervisors/detail",
                  headers={"OpenStack-API-Version": "compute 2.87"}).json["hypervisors"]
    by_name = {h["hypervisor_hostname"]: h for h in hyps}
    assert by_name["host1"]["status"] == "disabled" and by_name["host2"]["running_vms"] == 4
    assert by_name["host2"]["vcpus_used"] >= 0


def test_hypervisor_listings_page_from_2_33(plane_factory):
    p = plane_factory(computes=3)
    new = {"OpenStack-API-Version": "compute 2.53"}
    everything = [h["id"] for h in p.call("GET", "/v2.1/os-hypervisors", headers=new).json["hypervisors"]]
    assert len(everything) == 3
    first = p.call("GET", "/v2.1/os-hypervisors?limit=2", headers=new).json
    assert [h["id"] for h in first["hypervisors"]] == everything[:2]
    href = first["hypervisors_links"][0]["href"]
    rest = p.call("GET", href[href.index("/v2.1/"):], headers=new).json
    assert [h["id"] for h in rest["hypervisors"]] == everything[2:] and "hypervisors_links" not in rest
    assert p.call("GET", "/v2.1/os-hypervisors?marker=nope", headers=new).status_code == 400
    assert p.call("GET", "/v2.1/os-hypervisors?limit=-1", headers=new).status_code == 400
    old = {"OpenStack-API-Version": "compute 2.1"}  # before 2.33 nothing pages
    assert len(p.call("GET", "/v2.1/os-hypervisors?limit=1", headers=old).json["hypervisors"]) == 3


def test_hypervisors_list_their_servers_when_asked_from_2_53(plane_factory):
    p = plane_factory(computes=2)
    p.flavor()
    uuid = p.boot(name="on-host1", host="host1")
    wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")

    def servers(path: str, version: str) -> dict:
        r = p.call("GET", path, headers={"OpenStack-API-Version": f"compute {version}"})
        assert r.status_code == 200, r.text
        body = r.json
        found = body["hypervisors"] if "hypervisors" in body else [body["hypervisor"]]
        return {h["hypervisor_hostname"]: h.get("servers") for h in found}

    expected = [{"name": "on-host1", "uuid": uuid}]
    for path in ("/v2.1/os-hypervisors?with_servers=true", "/v2.1/os-hypervisors/detail?with_servers=1"):
        assert servers(path, "2.74") == {"host1": expected, "host2": None}  # empty left out before 2.75
        assert servers(path, "2.75") == {"host1": expected, "host2": []}
        assert servers(path, "2.52") == {"host1": None, "host2": None}  # not before 2.53
    assert servers("/v2.1/os-hypervisors?with_servers=false", "2.90") == {"host1": None, "host2": None}
    node = next(h for h in p.call("GET", "/v2.1/os-hypervisors").json["hypervisors"]
                if h["hypervisor_hostname"] == "host1")
    assert servers(f"/v2.1/os-hypervisors/{node['id']}?with_servers=yes", "2.90") == {"host1": expected}
    r = p.call("GET", "/v2.1/os-hypervisors?with_servers=maybe")
    assert r.status_code == 400 and "with_servers" in r.text
    assert p.call("DELETE", f"/v2.1/servers/{uuid}").status_code == 204
    wait_for(lambda: servers("/v2.1/os-hypervisors?with_servers=true", "2.90")["host1"] == [], what="gone")


def test_errors_are_in_novas_format(plane_factory):
    p = plane_factory(computes=1)
    p.flavor()
    cases = [
        (p.call("GET", "/v2.1/flavors/42"), 404, "itemNotFound", "Flavor 42 could not be found."),
        (p.call("POST", "/v2.1/servers", raw=b"{not json"), 400, "badRequest", None),
        (p.call("POST", "/v2.1/servers", {"server": {"name": "x", "flavorRef": "42", "imageRef": "cirros",
                                                     "networks": "none"}}), 400, "badRequest",
         "Flavor 42 could not be found."),
        (p.call("POST", "/v2.1/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": "nope",
                                                     "networks": "none"}}), 400, "badRequest", None),
        (p.call("POST", "/v2.1/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": "cirros"}}),
         400, "badRequest", None),  # networks required at 2.37+
        (p.call("POST", "/v2.1/servers", {"server": {"name": ["x"] * 5, "flavorRef": {"a": 1}}}), 400,
         "badRequest", None),
        (p.call("POST", "/v2.1/servers", [1, 2, 3]), 400, "badRequest", None),
        (p.call("GET", "/v2.1/servers", headers={"OpenStack-API-Version": "compute 2.999"}), 406, "computeFault",
         None),
        (p.call("GET", "/v2.1/servers", headers={"OpenStack-API-Version": "compute x.y"}), 400, "badRequest",
         None),
        (p.call("GET", "/v2.1/os-services", headers={"X-Auth-Token": "alice:p1"}), 403, "forbidden", None),
        (p.call("POST", "/v2.1/flavors", {"flavor": {"name": "small", "ram": 1, "vcpus": 1, "disk": 0, "id": "1"}}),
         409, "conflictingRequest", None),
        (p.call("GET", "/v2.1/servers/00000000-0000-0000-0000-000000000000"), 404, "itemNotFound", None),
        (p.call("GET", "/v2.1/servers", headers={"X-Auth-Token": ""}), 401, "unauthorized", None),
        (p.call("GET", "/v2.1/servers?limit=abc"), 400, "badRequest", None),
        (p.call("GET", "/v2.1/servers?marker=nope"), 400, "badRequest", None),
        (p.call("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": {"resources:VCPU": "-1"}}), 400,
         "badRequest", None),
    ]
    for r, status, kind, message in cases:
        assert r.status_code == status, (status, r.text)
        assert set(r.json) == {kind}, r.text
        assert r.json[kind]["code"] == status
        if message:
            assert r.json[kind]["message"] == message


def test_server_groups_and_anti_affinity(plane_factory):
    p = plane_factory(computes=2)
    p.flavor()
    r = p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "g", "policy": "anti-affinity"}})
    assert r.status_code == 200, r.text
    group = r.json["server_group"]
    assert group["policy"] == "anti-affinity" and group["rules"] == {}
    old = p.call("GET", f"/v2.1/os-server-groups/{group['id']}", headers={"OpenStack-API-Version": "compute 2.1"})
    assert old.json["server_group"]["policies"] == ["anti-affinity"]
    uuids = []
    for i in range(2):
        r = p.call("POST", "/v2.1/servers", {"server": {"name": f"g{i}", "flavorRef": "1", "imageRef": "cirros",
                                                        "networks": "none"},
                                             "os:scheduler_hints": {"group": group["id"]}})
        assert r.status_code == 202, r.text
        uuids.append(r.json["server"]["id"])
        wait_for(lambda: p.status(uuids[-1]) == "ACTIVE", what="ACTIVE")
    hosts = {p.call("GET", f"/v2.1/servers/{u}").json["server"]["OS-EXT-SRV-ATTR:host"] for u in uuids}
    assert len(hosts) == 2
    members = p.call("GET", f"/v2.1/os-server-groups/{group['id']}").json["server_group"]["members"]
    assert sorted(members) == sorted(uuids)
    assert p.call("DELETE", f"/v2.1/os-server-groups/{group['id']}").status_code == 204


def test_server_group_listings_take_offset_and_limit(plane_factory):
    p = plane_factory()
    for name in ("a", "b", "c"):
        r = p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": name, "policy": "affinity"}})
        assert r.status_code == 200, r.text
    everything = [g["name"] for g in p.call("GET", "/v2.1/os-server-groups").json["server_groups"]]
    assert sorted(everything) == ["a", "b", "c"]
    page = p.call("GET", "/v2.1/os-server-groups?offset=1&limit=1").json["server_groups"]
    assert [g["name"] for g in page] == everything[1:2]
    for query in ("limit=-1", "limit=x", "offset=-2", "offset=1.5"):
        resp = p.call("GET", f"/v2.1/os-server-groups?{query}")
        assert resp.status_code == 400, (query, resp.text)
        assert "badRequest" in resp.json


def test_min_count_below_max_count_still_needs_room_for_max_count(plane_factory):
    """Nova's scheduler places every one of ``max_count`` instances or none
    (its ``min_count`` only bounds what the quota check may cut ``max_count``
    down to, and there are no quotas here): a request that only partly fits
    fails whole, and nothing stays allocated."""
    p = plane_factory(computes=1)  # 32 GB of memory: one of these fits, two do not
    p.flavor(fid="half", name="half", vcpus=1, ram=30000, disk=1)
    r = p.call("POST", "/v2.1/servers", {"server": {"name": "many", "flavorRef": "half", "imageRef": "cirros",
                                                    "networks": "none", "min_count": 1, "max_count": 2}})
    assert r.status_code == 202, r.text
    servers = wait_for(lambda: (lambda s: s if len(s) == 2 and all(x["status"] == "ERROR" for x in s) else None)(
        p.call("GET", "/v2.1/servers/detail").json["servers"]), what="2 ERROR")
    assert all("No valid host" in s["fault"]["message"] for s in servers)
    assert all(not p.d.placement.get_allocations(s["id"]).allocations for s in servers)
    one = p.boot(name="one", flavor="half")  # min_count alone would have fitted
    wait_for(lambda: p.status(one) == "ACTIVE", what="ACTIVE")

def test_a_request_redelivered_after_its_super_conductor_died_is_resumed(plane_factory):
    """The dead one handed the first instance over and had claimed the second:
    the resumed request leaves the first alone, frees the stale claim and
    builds the second; nothing is held twice."""
    p = plane_factory(computes=2)
    p.flavor()
    conductor = p.plane.conductor
    plans = []
    conductor.schedule_and_build = lambda plan, resumed=False: plans.append(plan)
    p.boot(name="pair", min_count=2, max_count=2)
    wait_for(lambda: plans, what="the request to reach the super conductor")
    del conductor.schedule_and_build
    (plan,) = plans
    first, second = plan.instance_uuids

    real = conductor._hand_over
    def dies_after_the_first(plan_, summary, name, line):
        if line[0].consumer_uuid == second:
            raise RuntimeError("killed")
        return real(plan_, summary, name, line)
    conductor._hand_over = dies_after_the_first
    try:
        conductor.schedule_and_build(plan)
    except RuntimeError:
        pass
    del conductor._hand_over
    assert p.d.placement.get_allocations(second).allocations  # claimed for nobody
    first_host = inst.get(p.cells.engine_of(instance_mappings.get(p.api_engine, first).cell), first).host

    outcomes = conductor.schedule_and_build(plan, resumed=True)
    assert [o.instance_uuid for o in outcomes] == [first, second]
    wait_for(lambda: p.status(first) == "ACTIVE" and p.status(second) == "ACTIVE", what="both ACTIVE")
    assert inst.get(p.cells.engine_of("cell1"), first).host == first_host
    for uuid in (first, second):
        held = p.d.placement.get_allocations(uuid).allocations
        assert len(held) == 1, held
    assert build_requests.get(p.api_engine, second) is None


def test_availability_zones_as_nova_lists_them(plane_factory):
    from billeting.scheduler.service import metadata, zones

    p = plane_factory(computes=4)
    zones.define(p.plane.scheduler, "az1", ["host1", "host2"])
    # A zone may also be any Placement aggregate whose metadata names it.
    placement, agg = p.d.placement, str(uuidlib.uuid4())
    host4, = placement.list_providers(name="host4")
    placement.put_aggregates(host4.uuid, [agg], placement.get_aggregates(host4.uuid).resource_provider_generation)
    metadata.put(p.plane.scheduler, agg, metadata={"availability_zone": "az2"}, name="blue")

    def listing(path: str, token: str = "admin"):
        r = p.call("GET", f"/v2.1/os-availability-zone{path}", headers={"X-Auth-Token": token})
        assert r.status_code == 200, r.text
        return {z["zoneName"]: z for z in r.json["availabilityZoneInfo"]}

    # Any user sees where a server can go: no hosts, no internal zone.
    plain = listing("", token="alice:p1")
    assert plain == {name: {"zoneName": name, "zoneState": {"available": True}, "hosts": None}
                     for name in ("az1", "az2", "nova")}
    # The admin's detail names each zone's hosts and services, conductors in "internal".
    detail = listing("/detail")
    assert set(detail["az1"]["hosts"]) == {"host1", "host2"} and set(detail["nova"]["hosts"]) == {"host3"}
    assert set(detail["az2"]["hosts"]) == {"host4"}
    state = detail["az1"]["hosts"]["host1"]["nova-compute"]
    assert state["available"] is True and state["active"] is True and state["updated_at"]
    assert any("nova-conductor" in services for services in detail["internal"]["hosts"].values())
    assert p.call("GET", "/v2.1/os-availability-zone/detail",
                  headers={"X-Auth-Token": "alice:p1"}).status_code == 403
    # os-services says each compute's zone.
    services = {(s["host"], s["binary"]): s for s in p.call("GET", "/v2.1/os-services").json["services"]}
    assert services[("host1", "nova-compute")]["zone"] == "az1"
    assert services[("host3", "nova-compute")]["zone"] == "nova"
    assert {s["zone"] for (h, b), s in services.items() if b == "nova-conductor"} == {"internal"}
    # A zone whose every compute is disabled is listed, unavailable.
    for host in ("host1", "host2"):
        sid = services[(host, "nova-compute")]["id"]
        assert p.call("PUT", f"/v2.1/os-services/{sid}", {"status": "disabled"}).json["service"]["zone"] == "az1"
    assert listing("")["az1"]["zoneState"] == {"available": False}
    assert listing("/detail")["az1"] == {"zoneName": "az1", "zoneState": {"available": False}, "hosts": None}
    # A server may ask for either kind of zone, and lands there.
    p.flavor()
    uuid = p.boot(name="in-az2", availability_zone="az2")
    wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
    server = p.call("GET", f"/v2.1/servers/{uuid}").json["server"]
    assert (server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-AZ:availability_zone"]) == ("host4", "az2")


def test_without_placement_os_services_still_answers_and_zones_are_503(plane_factory, monkeypatch):
    from billeting.placement_client.client import PlacementUnavailable

    p = plane_factory(computes=1)

    def down(*_a, **_kw):
        raise PlacementUnavailable(0, "connection refused")

    monkeypatch.setattr(p.plane.scheduler.catalog, "host_uuids", down)
    services = p.call("GET", "/v2.1/os-services")
    assert services.status_code == 200, services.text  # operators force computes down in outages
    assert {s["zone"] for s in services.json["services"] if s["binary"] == "nova-compute"} == {"nova"}
    zones = p.call("GET", "/v2.1/os-availability-zone")
    assert zones.status_code == 503 and "Placement is unavailable" in zones.text, zones.text


def test_deleted_servers_in_listings_as_nova_shows_them(plane_factory):
    p = plane_factory(computes=1)
    p.flavor()
    kept, gone = p.boot(name="kept"), p.boot(name="gone")
    for uuid in (kept, gone):
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
    assert p.call("DELETE", f"/v2.1/servers/{gone}").status_code == 204
    wait_for(lambda: p.call("GET", f"/v2.1/servers/{gone}").status_code == 404, what="deleted")

    def names(query: str, token: str = "admin") -> dict[str, str]:
        r = p.call("GET", f"/v2.1/servers/detail{query}", headers={"X-Auth-Token": token})
        assert r.status_code == 200, r.text
        return {s["name"]: s["status"] for s in r.json["servers"]}

    assert names("") == {"kept": "ACTIVE"}
    # What changed since a time includes what was deleted since (a client polling sees deletions).
    since = "?changes-since=2000-01-01T00:00:00Z"
    assert names(since) == {"kept": "ACTIVE", "gone": "DELETED"}
    assert names(since + "&deleted=false") == {"kept": "ACTIVE"}
    assert names("?changes-since=2999-01-01T00:00:00Z") == {}
    # An admin's deleted=true and status=DELETED list deleted servers only.
    assert names("?deleted=true") == {"gone": "DELETED"} == names("?status=DELETED")
    assert names("?deleted=no") == {"kept": "ACTIVE"}
    # Others may not: their "deleted" is ignored, status=DELETED is a 403 (the servers are admin's project's).
    assert names("?deleted=true", token="bob:admin") == {"kept": "ACTIVE"}
    r = p.call("GET", "/v2.1/servers?status=DELETED", headers={"X-Auth-Token": "bob:admin"})
    assert r.status_code == 403 and "Only administrators" in r.text, r.text


def test_server_listings_sort_as_asked(plane_factory):
    """`openstack server list --sort name:asc` sends sort_key/sort_dir."""
    p = plane_factory(computes=2)
    p.flavor()
    made = []
    for n in ("b", "c", "a"):  # a second apart: creation times differ on every database
        made.append(p.boot(name=n))
        time.sleep(1.1)
    for uuid in made:
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")

    def names(query: str, token: str = "admin"):
        r = p.call("GET", f"/v2.1/servers/detail{query}", headers={"X-Auth-Token": token})
        assert r.status_code == 200, r.text
        return [s["name"] for s in r.json["servers"]]

    assert names("?sort_key=display_name&sort_dir=asc") == ["a", "b", "c"]
    assert names("?sort_key=display_name") == ["c", "b", "a"]  # desc by default
    assert names("") == ["a", "c", "b"]  # newest first without a sort
    assert names("?sort_key=created_at&sort_dir=asc") == ["b", "c", "a"]
    assert names("?sort_dir=asc") == ["b", "c", "a"]  # a direction alone sorts by creation time
    # Several keys, the first most significant; keys Nova takes but cannot apply here are dropped.
    hosts = {s["name"]: s["OS-EXT-SRV-ATTR:host"] for s in p.call("GET", "/v2.1/servers/detail").json["servers"]}
    expected = [n for _, n in sorted((hosts[n], n) for n in hosts)]
    assert names("?sort_key=host&sort_dir=asc&sort_key=display_name&sort_dir=asc&sort_key=key_name") == expected
    # Pages follow the sort (the next link keeps it).
    first = p.call("GET", "/v2.1/servers?sort_key=display_name&sort_dir=asc&limit=2").json
    assert [s["name"] for s in first["servers"]] == ["a", "b"]
    href = first["servers_links"][0]["href"]
    assert [s["name"] for s in p.call("GET", href[href.index("/v2.1/"):]).json["servers"]] == ["c"]
    # Bad keys and directions are 400s; host and node are for admins only.
    for query in ("?sort_key=colour", "?sort_key=display_name&sort_dir=up",
                  "?sort_key=display_name&sort_dir=asc&sort_dir=desc"):
        assert p.call("GET", f"/v2.1/servers{query}").status_code == 400, query
    r = p.call("GET", "/v2.1/servers?sort_key=host", headers={"X-Auth-Token": "bob:admin"})
    assert r.status_code == 403 and "Only administrators can sort servers by host" in r.text, r.text


def test_a_server_booted_from_a_volume_claims_no_root_disk_on_its_host(plane_factory):
    p = plane_factory(computes=1)
    p.flavor(disk=20)
    r = p.call("POST", "/v2.1/servers", {"server": {
        "name": "bfv", "flavorRef": "1", "networks": "none",
        "block_device_mapping_v2": [{"boot_index": 0, "uuid": str(uuidlib.uuid4()), "source_type": "volume",
                                     "destination_type": "volume"}]}})
    assert r.status_code == 202, r.text
    bfv = r.json["server"]["id"]
    imaged = p.boot(name="imaged")
    for uuid in (bfv, imaged):
        wait_for(lambda uuid=uuid: p.status(uuid) == "ACTIVE", what="ACTIVE")

    def claimed(uuid: str) -> dict[str, int]:
        (part,) = p.d.placement.get_allocations(uuid).allocations.values()
        return dict(part.resources)

    assert "DISK_GB" not in claimed(bfv) and claimed(bfv)["VCPU"] == 2
    assert claimed(imaged)["DISK_GB"] == 20


def test_an_admin_may_name_the_host_or_node_a_server_goes_to(plane_factory):
    p = plane_factory(computes=3)
    p.flavor()

    def host_of(uuid: str) -> tuple[str, str]:
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
        server = p.call("GET", f"/v2.1/servers/{uuid}").json["server"]
        return server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-AZ:availability_zone"]

    # 2.74's fields, and the older "zone:host", "zone::node" and ":host" forms.
    for extra, host in (({"host": "host2"}, "host2"), ({"hypervisor_hostname": "host3"}, "host3"),
                        ({"availability_zone": "nova:host1"}, "host1"),
                        ({"availability_zone": "nova::host3"}, "host3"), ({"availability_zone": ":host2"}, "host2")):
        for _ in range(2):  # twice: chance alone would not put both there
            assert host_of(p.boot(**extra)) == (host, "nova"), extra

    def refused(status: int, headers=None, **extra) -> str:
        server = {"name": "x", "flavorRef": "1", "imageRef": "cirros", "networks": "none", **extra}
        r = p.call("POST", "/v2.1/servers", {"server": server}, headers=headers)
        assert r.status_code == status, (extra, r.text)
        return r.text

    user = {"X-Auth-Token": "alice:p1"}
    assert "requested_destination" in refused(403, user, host="host1")
    assert "forced_host" in refused(403, user, availability_zone="nova:host1")
    assert "Compute host nowhere could not be found" in refused(400, host="nowhere")
    assert "Compute host node nowhere could not be found" in refused(400, hypervisor_hostname="nowhere")
    assert "not available" in refused(400, availability_zone="elsewhere:host1")
    assert "2.74" in refused(400, {"OpenStack-API-Version": "compute 2.73"}, host="host1")
    assert len(p.call("GET", "/v2.1/servers").json["servers"]) == 10  # nothing kept of the refused ones
    # A zone the scheduler's API named with a ':' is a zone, for anyone.
    from billeting.scheduler.service import zones

    zones.define(p.plane.scheduler, "edge:1", ["host1"])
    r = p.call("POST", "/v2.1/servers", {"server": {"name": "edge", "flavorRef": "1", "imageRef": "cirros",
                                                    "networks": "none", "availability_zone": "edge:1"}}, headers=user)
    assert r.status_code == 202, r.text
    assert host_of(r.json["server"]["id"]) == ("host1", "edge:1")


def test_failure_domain_hints_place_servers_by_rack_and_moves_keep_them(plane_factory):
    from billeting.scheduler.service import topology

    p = plane_factory(computes=4)
    service = p.plane.scheduler
    topology.define(service, "rack", "r1", hosts=["host1", "host2"])
    topology.define(service, "rack", "r2", hosts=["host3", "host4"])
    rack_of = {"host1": "r1", "host2": "r1", "host3": "r2", "host4": "r2"}
    p.flavor()

    def host_of(uuid: str, status: str = "ACTIVE") -> str:
        wait_for(lambda: p.status(uuid) == status, what=status)
        return p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["OS-EXT-SRV-ATTR:host"]

    def boot(**hints) -> str:
        return p.boot(hints=hints)

    first = boot()
    home = rack_of[host_of(first)]
    for _ in range(2):
        assert rack_of[host_of(boot(different_rack=[first]))] != home
        assert rack_of[host_of(boot(same_rack=first.upper()))] == home
        assert rack_of[host_of(boot(near_rack="r2"))] == "r2"

    # A cold migration keeps the constraint: the other host of the same rack.
    pinned = boot(same_rack=[first])
    before = host_of(pinned)
    assert p.call("POST", f"/v2.1/servers/{pinned}/action", {"migrate": None}).status_code == 202
    after = host_of(pinned, "VERIFY_RESIZE")
    assert after != before and rack_of[after] == home

    for hints, words in (({"same_rack": ["nope"]}, "same_rack takes server uuids"),
                         ({"near_rack": "r9"}, "no rack named 'r9'")):
        r = p.call("POST", "/v2.1/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": "cirros",
                                                        "networks": "none"}, "os:scheduler_hints": hints})
        assert r.status_code == 400 and words in r.text, r.text


def test_a_server_group_may_hold_its_policy_per_rack(plane_factory):
    from billeting.scheduler.service import topology

    p = plane_factory(computes=4)
    topology.define(p.plane.scheduler, "rack", "r1", hosts=["host1", "host2"])
    topology.define(p.plane.scheduler, "rack", "r2", hosts=["host3", "host4"])
    rack_of = {"host1": "r1", "host2": "r1", "host3": "r2", "host4": "r2"}
    p.flavor()
    r = p.call("POST", "/v2.1/os-server-groups", {"server_group": {
        "name": "per-rack", "policy": "anti-affinity", "rules": {"scope": "rack"}}})
    assert r.status_code == 200, r.text
    group = r.json["server_group"]
    assert group["rules"] == {"scope": "rack"}
    assert p.call("GET", f"/v2.1/os-server-groups/{group['id']}").json["server_group"]["rules"] == {"scope": "rack"}
    placed = []
    for i in range(2):
        uuid = p.boot(name=f"m{i}", hints={"group": group["id"]})
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
        placed.append(p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["OS-EXT-SRV-ATTR:host"])
    assert {rack_of[h] for h in placed} == {"r1", "r2"}
    # A third finds both racks taken, although two hosts are free.
    third = p.boot(name="m2", hints={"group": group["id"]})
    wait_for(lambda: p.status(third) == "ERROR", what="ERROR")
    for rules in ({"scope": "galaxy"}, {"scope": "rack", "max_server_per_host": 2, "extra": 1}):
        r = p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "x", "policy": "anti-affinity",
                                                                       "rules": rules}})
        assert r.status_code == 400, r.text


def test_an_admin_deletes_a_compute_service_that_runs_nothing(plane_factory):
    p = plane_factory(computes=3)
    p.flavor()
    busy = p.boot(name="busy", host="host1")
    wait_for(lambda: p.status(busy) == "ACTIVE", what="ACTIVE")

    def services() -> dict[tuple[str, str], str]:
        return {(s["host"], s["binary"]): s["id"] for s in p.call("GET", "/v2.1/os-services").json["services"]}

    ids = services()
    r = p.call("DELETE", f"/v2.1/os-services/{ids[('host1', 'nova-compute')]}")
    assert r.status_code == 409 and "hosting instances" in r.text, r.text
    assert p.call("DELETE", f"/v2.1/os-services/{ids[('host2', 'nova-compute')]}",
                  headers={"X-Auth-Token": "alice:p1"}).status_code == 403

    # host3 holds an allocation nobody's server explains: Placement refuses, nothing is removed.
    placement = p.d.placement
    (host3,) = placement.list_providers(name="host3")
    from billeting.placement_client.model import AllocationWrite, ProviderResources

    stray = str(uuidlib.uuid4())
    assert placement.put_allocations(stray, AllocationWrite(
        allocations={host3.uuid: ProviderResources(resources={"VCPU": 1})}, project_id="p", user_id="u",
        consumer_generation=None)).ok
    r = p.call("DELETE", f"/v2.1/os-services/{ids[('host3', 'nova-compute')]}")
    assert r.status_code == 409 and "still holds allocations" in r.text, r.text
    assert ("host3", "nova-compute") in services() and placement.list_providers(name="host3")

    # host2, stopped first as Nova asks: gone from every listing, Placement and the scheduler.
    p.d.computes["host2"].stop()
    r = p.call("DELETE", f"/v2.1/os-services/{ids[('host2', 'nova-compute')]}")
    assert r.status_code == 204, r.text
    assert ("host2", "nova-compute") not in services()
    assert "host2" not in {h["hypervisor_hostname"] for h in p.call("GET", "/v2.1/os-hypervisors").json["hypervisors"]}
    assert placement.list_providers(name="host2") == []
    assert cell_mappings.cell_of_host(p.api_engine, "host2") is None
    r = p.call("POST", "/v2.1/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": "cirros",
                                                    "networks": "none", "host": "host2"}})
    assert r.status_code == 400 and "host2 could not be found" in r.text, r.text
    assert p.call("DELETE", f"/v2.1/os-services/{ids[('host2', 'nova-compute')]}").status_code == 404

    # host3 deleted while its compute still runs: its next heartbeat registers the
    # service and reports its node to Placement again at once (not minutes later).
    placement.delete_allocations(stray)
    assert p.call("DELETE", f"/v2.1/os-services/{ids[('host3', 'nova-compute')]}").status_code == 204
    assert placement.list_providers(name="host3") == []
    (manager,) = p.d.computes["host3"].managers
    manager.heartbeat()
    assert ("host3", "nova-compute") in services() and placement.list_providers(name="host3")


def test_limits_show_the_projects_usage_and_no_quota(plane_factory):
    p = plane_factory(computes=2)
    p.flavor()  # 2 vCPUs, 2048 MB
    alice = {"X-Auth-Token": "alice:p1"}
    for name in ("a", "b"):
        r = p.call("POST", "/v2.1/servers", {"server": {"name": name, "flavorRef": "1", "imageRef": "cirros",
                                                        "networks": "none"}}, headers=alice)
        assert r.status_code == 202, r.text
    gone = p.boot(name="admins")  # another project's: not counted
    p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "g", "policy": "affinity"}}, headers=alice)

    def limits(headers) -> dict:
        r = p.call("GET", "/v2.1/limits", headers=headers)
        assert r.status_code == 200, r.text
        assert r.json["limits"]["rate"] == []
        return r.json["limits"]["absolute"]

    mine = limits(alice)
    assert (mine["totalInstancesUsed"], mine["totalCoresUsed"], mine["totalRAMUsed"],
            mine["totalServerGroupsUsed"]) == (2, 4, 4096, 1)
    assert mine["maxTotalCores"] == mine["maxTotalInstances"] == mine["maxTotalRAMSize"] == -1
    assert "maxPersonality" not in mine and "maxSecurityGroups" not in mine  # gone at 2.57 and 2.36
    old = limits({**alice, "OpenStack-API-Version": "compute 2.1"})
    assert old["maxPersonality"] == -1 and old["totalFloatingIpsUsed"] == 0
    # An admin may look at another project's; a user may not.
    assert limits({"X-Auth-Token": "admin"})["totalInstancesUsed"] == 1
    r = p.call("GET", "/v2.1/limits?tenant_id=p1")
    assert r.json["limits"]["absolute"]["totalInstancesUsed"] == 2
    assert p.call("GET", "/v2.1/limits?tenant_id=admin", headers=alice).status_code == 403
    # A deleted server stops counting.
    assert p.call("DELETE", f"/v2.1/servers/{gone}").status_code == 204
    wait_for(lambda: limits({"X-Auth-Token": "admin"})["totalInstancesUsed"] == 0, what="deleted")
