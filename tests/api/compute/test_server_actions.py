"""Server actions end to end: HTTP → compute API → the real move tasks →
the cell's computes, with Placement checked after every step; os-migrations
and instance actions (with events) as operators read them."""
from __future__ import annotations

import dataclasses
import threading

import falcon.testing
import jsonschema
import orjson
import pytest

from billeting.api.compute import openapi
from billeting.api.compute.app import make_app
from billeting.compute.fake import FakeConfig
from billeting.compute.manager import ComputeManager
from billeting.compute.service import ComputeService
from billeting.compute.settings import ComputeSettings
from billeting.conductor.move_protocols import MoveAccepted, MoveRefused
from tests.api.compute.conftest import ADMIN
from tests.moves.conftest import GatedDriver
from tests.support.wait import wait_for

SIZES = {"host1": 65536, "host2": 32768, "host3": 16384}  # the RAM weigher ranks host1 > host2 > host3
SMALL = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 20}
LARGE = {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 40}


class Moves:
    def __init__(self, p) -> None:
        self.p = p
        self.drivers: dict[str, GatedDriver] = {}
        wiring = p.d.cell("cell1")
        for host, ram in SIZES.items():
            driver = GatedDriver(host, FakeConfig(vcpus=16, memory_mb=ram, disk_gb=500))
            service = ComputeService(wiring, [ComputeManager(host, driver, wiring, ComputeSettings())],
                                     periodic=False)
            service.start()
            p.d.computes[host] = service
            self.drivers[host] = driver
        p.flavor(fid="1", name="small", ram=2048, vcpus=2, disk=20)
        p.flavor(fid="2", name="large", ram=4096, vcpus=4, disk=40)
        p.flavor(fid="3", name="huge", ram=60000, vcpus=2, disk=20)

    def act(self, uuid: str, body, version: str = "2.90", token: str = "admin"):
        return self.p.call("POST", f"/v2.1/servers/{uuid}/action", body,
                           headers={"OpenStack-API-Version": f"compute {version}", "X-Auth-Token": token})

    def server(self, uuid: str, version: str = "2.90") -> dict:
        return self.p.call("GET", f"/v2.1/servers/{uuid}",
                           headers={"OpenStack-API-Version": f"compute {version}"}).json["server"]

    def boot(self) -> str:
        uuid = self.p.boot(flavor="1")
        wait_for(lambda: self.p.status(uuid) == "ACTIVE", what="ACTIVE")
        return uuid

    def settled(self, uuid: str, status: str) -> dict:
        return wait_for(lambda: (s := self.server(uuid))["status"] == status and s["OS-EXT-STS:task_state"] is None
                        and s, what=f"{uuid} {status}")

    def node(self, host: str) -> str:
        return self.drivers[host].node_facts(host).uuid

    def held(self, consumer: str) -> dict:
        return self.p.d.placement.get_allocations(consumer).as_resources()

    def on(self, host: str, resources: dict) -> dict:
        return {self.node(host): resources}

    def migrations(self, uuid: str, version: str = "2.90") -> list[dict]:
        r = self.p.call("GET", f"/v2.1/os-migrations?instance_uuid={uuid}",
                        headers={"OpenStack-API-Version": f"compute {version}"})
        assert r.status_code == 200, r.text
        return r.json["migrations"]

    def actions(self, uuid: str) -> dict[str, dict]:
        """Each action (the latest of a kind) with its events."""
        listed = self.p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions").json["instanceActions"]
        found = {}
        for a in reversed(listed):  # newest first in the listing
            one = self.p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions/{a['request_id']}")
            assert one.status_code == 200, one.text
            found[a["action"]] = one.json["instanceAction"]
        return found


@pytest.fixture
def moves(plane_factory):
    m = Moves(plane_factory(computes=0))
    yield m
    for driver in m.drivers.values():
        driver.gate.set()


def _finished(action: dict, events: list[str]) -> None:
    assert action["message"] is None and action["updated_at"], action
    assert [e["event"] for e in action["events"]] == events, action
    for e in action["events"]:
        assert e["result"] == "Success" and e["finish_time"] and e["start_time"], e


def test_cold_migrate_then_confirm(moves):
    m = moves
    uuid = m.boot()
    assert m.server(uuid)["OS-EXT-SRV-ATTR:host"] == "host1"
    assert m.held(uuid) == m.on("host1", SMALL)

    m.drivers["host2"].gate.clear()  # hold the destination to look at the move in flight
    r = m.act(uuid, {"migrate": None})
    assert r.status_code == 202, r.text
    wait_for(m.drivers["host2"].waiting.is_set, what="the destination to start")
    assert m.server(uuid)["status"] == "RESIZE"
    m.drivers["host2"].gate.set()

    body = m.settled(uuid, "VERIFY_RESIZE")
    assert body["OS-EXT-SRV-ATTR:host"] == "host2" and body["flavor"]["original_name"] == "small"
    owner = m.p.call("GET", f"/v2.1/servers/{uuid}", headers={"X-Auth-Token": "bob:admin"}).json["server"]
    assert owner["status"] == "VERIFY_RESIZE" and "OS-EXT-SRV-ATTR:host" not in owner  # admin only
    migration, = m.migrations(uuid)
    assert (migration["status"], migration["migration_type"], migration["source_compute"],
            migration["dest_compute"]) == ("finished", "migration", "host1", "host2")
    assert migration["old_instance_type_id"] == migration["new_instance_type_id"] is not None
    # The instance holds the destination, the migration the source.
    assert m.held(uuid) == m.on("host2", SMALL)
    assert m.held(migration["uuid"]) == m.on("host1", SMALL)

    r = m.act(uuid, {"confirmResize": None})
    assert r.status_code == 204, r.text
    body = m.settled(uuid, "ACTIVE")
    assert body["OS-EXT-SRV-ATTR:host"] == "host2"
    assert m.held(uuid) == m.on("host2", SMALL) and m.held(migration["uuid"]) == {}
    assert m.migrations(uuid)[0]["status"] == "confirmed"

    actions = m.actions(uuid)
    assert set(actions) == {"create", "migrate", "confirmResize"}
    # The build's own action is finished too (derived from the cell's record).
    _finished(actions["create"], ["conductor_schedule_and_build_instances", "compute__do_build_and_run_instance"])
    _finished(actions["migrate"], ["conductor_migrate_server", "compute_finish_resize"])
    _finished(actions["confirmResize"], ["compute_confirm_resize"])
    assert actions["migrate"]["events"][1]["host"] == "host2"


def test_resize_then_revert_and_the_flavor_shown(moves):
    m = moves
    uuid = m.boot()
    r = m.act(uuid, {"resize": {"flavorRef": "2"}})
    assert r.status_code == 202, r.text
    body = m.settled(uuid, "VERIFY_RESIZE")
    assert body["flavor"]["original_name"] == "large" and body["flavor"]["vcpus"] == 4
    old = m.server(uuid, version="2.46")["flavor"]
    assert old["id"] == "2" and old["links"][0]["href"].endswith("/flavors/2") and set(old) == {"id", "links"}
    migration, = m.migrations(uuid)
    assert migration["migration_type"] == "resize" and migration["status"] == "finished"
    assert m.held(uuid) == m.on("host2", LARGE)
    assert m.held(migration["uuid"]) == m.on("host1", SMALL)

    assert m.act(uuid, {"resize": {"flavorRef": "1"}}).status_code == 409  # not ACTIVE
    r = m.act(uuid, {"revertResize": None})
    assert r.status_code == 202, r.text
    body = m.settled(uuid, "ACTIVE")
    assert body["OS-EXT-SRV-ATTR:host"] == "host1" and body["flavor"]["original_name"] == "small"
    assert m.server(uuid, version="2.46")["flavor"]["id"] == "1"
    assert m.held(uuid) == m.on("host1", SMALL) and m.held(migration["uuid"]) == {}
    assert m.migrations(uuid)[0]["status"] == "reverted"
    r = m.act(uuid, {"confirmResize": None})
    assert r.status_code == 409 and "conflictingRequest" in r.json

    actions = m.actions(uuid)
    _finished(actions["resize"], ["conductor_migrate_server", "compute_finish_resize"])
    _finished(actions["revertResize"], ["compute_revert_resize"])

    # Resized again and confirmed: the new flavor stays, the source is freed.
    assert m.act(uuid, {"resize": {"flavorRef": "2"}}).status_code == 202
    m.settled(uuid, "VERIFY_RESIZE")
    assert m.act(uuid, {"confirmResize": None}).status_code == 204
    body = m.settled(uuid, "ACTIVE")
    assert body["flavor"]["original_name"] == "large"
    assert m.held(uuid) == m.on(body["OS-EXT-SRV-ATTR:host"], LARGE)
    assert all(m.held(x["uuid"]) == {} for x in m.migrations(uuid))


def test_resize_errors_are_novas(moves):
    m = moves
    uuid = m.boot()
    cases = [
        (m.act(uuid, {"resize": {"flavorRef": "42"}}), 400, "Flavor 42 could not be found."),
        (m.act(uuid, {"resize": {"flavorRef": "1"}}), 400, "instances must change flavor"),
        (m.act(uuid, {"resize": {}}), 400, "flavorRef"),
        (m.act(uuid, {"resize": {"flavorRef": "3"}}), 400, "No valid host was found"),
        (m.act(uuid, {"confirmResize": None}), 409, "vm_state active"),
        (m.act(uuid, {"revertResize": None}), 409, "vm_state active"),
        # (another project's server is not found, as in Nova, before the policy is asked)
        (m.act(uuid, {"migrate": None}, token="alice"), 404, None),
        (m.act(uuid, {"migrate": None}, token="alice:admin"), 403, "os-migrate-server:migrate"),
        (m.act(uuid, {"migrate": {"host": "nowhere"}}), 400, "No valid host was found"),
        (m.act(uuid, {"reboot": {"type": "HARD"}}), 400, "no such action"),
        (m.act("00000000-0000-4000-8000-000000000000", {"migrate": None}), 404, None),
    ]
    for r, status, text in cases:
        assert r.status_code == status, (status, r.text)
        kind, = r.json
        assert r.json[kind]["code"] == status
        if text:
            assert text in r.json[kind]["message"], r.text
    # The scheduler's explanation, not a bare "no valid host".
    r = m.act(uuid, {"resize": {"flavorRef": "3"}})
    assert "MEMORY_MB" in r.json["badRequest"]["message"] or "memory" in r.json["badRequest"]["message"].lower()
    assert m.server(uuid)["status"] == "ACTIVE" and m.held(uuid) == m.on("host1", SMALL)
    failed = [a for a in m.p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions").json["instanceActions"]
              if a["action"] == "resize"]
    assert failed and all(a["message"] == "Error" for a in failed)


def test_live_migration_with_and_without_a_host(moves):
    m = moves
    uuid = m.boot()
    m.drivers["host2"].gate.clear()
    r = m.act(uuid, {"os-migrateLive": {"host": None, "block_migration": "auto"}}, version="2.25")
    assert r.status_code == 202, r.text
    wait_for(m.drivers["host2"].waiting.is_set, what="the destination to start")
    body = m.server(uuid)
    assert body["status"] == "MIGRATING" and body["OS-EXT-SRV-ATTR:host"] == "host1"
    live = m.p.call("GET", f"/v2.1/servers/{uuid}/migrations").json["migrations"]
    assert len(live) == 1 and live[0]["server_uuid"] == uuid and live[0]["dest_compute"] == "host2"
    one = m.p.call("GET", f"/v2.1/servers/{uuid}/migrations/{live[0]['id']}")
    assert one.status_code == 200 and one.json["migration"]["uuid"] == live[0]["uuid"]
    listed, = m.migrations(uuid)
    assert listed["links"][0]["href"].endswith(f"/servers/{uuid}/migrations/{live[0]['id']}")
    assert m.held(uuid) == m.on("host2", SMALL) and m.held(live[0]["uuid"]) == m.on("host1", SMALL)
    m.drivers["host2"].gate.set()

    body = m.settled(uuid, "ACTIVE")
    assert body["OS-EXT-SRV-ATTR:host"] == "host2"
    wait_for(lambda: m.migrations(uuid)[0]["status"] == "completed", what="the migration to complete")
    assert m.held(uuid) == m.on("host2", SMALL) and m.held(live[0]["uuid"]) == {}
    assert m.p.call("GET", f"/v2.1/servers/{uuid}/migrations").json["migrations"] == []
    _finished(m.actions(uuid)["live-migration"], ["conductor_live_migrate_instance", "compute_live_migration"])

    # The old body shape (before 2.25), to a named host.
    r = m.act(uuid, {"os-migrateLive": {"host": "host3", "block_migration": False, "disk_over_commit": False}},
              version="2.1")
    assert r.status_code == 202, r.text
    assert m.settled(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"] == "host3"
    assert m.held(uuid) == m.on("host3", SMALL)
    bad = [
        m.act(uuid, {"os-migrateLive": {"host": None, "block_migration": "auto", "disk_over_commit": False}},
              version="2.25"),
        m.act(uuid, {"os-migrateLive": {"host": None, "block_migration": "auto"}}, version="2.1"),
        m.act(uuid, {"os-migrateLive": {"block_migration": "auto"}}),
        m.act(uuid, {"os-migrateLive": {"host": "host1", "block_migration": "auto", "force": True}}),
        m.act(uuid, {"os-migrateLive": {"host": "host3", "block_migration": "auto"}}),  # its own host
    ]
    assert [r.status_code for r in bad] == [400] * 5, [r.text for r in bad]
    assert m.held(uuid) == m.on("host3", SMALL)
    assert m.p.call("GET", f"/v2.1/servers/{uuid}/migrations",
                    headers={"OpenStack-API-Version": "compute 2.22"}).status_code == 404


def test_evacuate_only_from_a_compute_that_is_down(moves):
    m = moves
    uuid = m.boot()
    r = m.act(uuid, {"evacuate": {}})
    assert r.status_code == 409 and r.json["conflictingRequest"]["code"] == 409, r.text
    assert m.server(uuid)["status"] == "ACTIVE"

    m.p.d.computes["host1"].stop()
    service, = [s for s in m.p.call("GET", "/v2.1/os-services?host=host1").json["services"]]
    r = m.p.call("PUT", f"/v2.1/os-services/{service['id']}", {"forced_down": True})
    assert r.status_code == 200 and r.json["service"]["state"] == "down", r.text
    r = m.act(uuid, {"evacuate": {}})
    assert r.status_code == 200 and not r.content, r.text
    body = m.settled(uuid, "ACTIVE")
    assert body["OS-EXT-SRV-ATTR:host"] == "host2"
    # The source is down: the instance holds both until it comes back (docs/design/moves.md#evacuate).
    assert m.held(uuid) == {**m.on("host1", SMALL), **m.on("host2", SMALL)}
    migration, = m.migrations(uuid)
    assert migration["migration_type"] == "evacuation" and migration["source_compute"] == "host1"
    _finished(m.actions(uuid)["evacuate"], ["conductor_rebuild_server", "compute_rebuild_instance"])
    old = m.act(uuid, {"evacuate": {"onSharedStorage": False}}, version="2.13")
    assert old.status_code == 409  # host2 is up


def test_os_migrations_filters_and_pages(moves):
    m = moves
    a, b = m.boot(), m.boot()
    for uuid in (a, b):
        assert m.act(uuid, {"migrate": None}).status_code == 202
        m.settled(uuid, "VERIFY_RESIZE")
    assert m.act(a, {"confirmResize": None}).status_code == 204
    everything = m.p.call("GET", "/v2.1/os-migrations").json["migrations"]
    assert {x["instance_uuid"] for x in everything} == {a, b}
    assert m.p.call("GET", "/v2.1/os-migrations?status=confirmed").json["migrations"][0]["instance_uuid"] == a
    assert [x["instance_uuid"] for x in m.p.call("GET", "/v2.1/os-migrations?migration_type=migration")
            .json["migrations"]] == [x["instance_uuid"] for x in everything]
    page = m.p.call("GET", "/v2.1/os-migrations?limit=1").json
    assert len(page["migrations"]) == 1 and page["migrations_links"][0]["rel"] == "next"
    rest = m.p.call("GET", f"/v2.1/os-migrations?limit=1&marker={page['migrations'][0]['uuid']}").json
    assert rest["migrations"][0]["uuid"] == everything[1]["uuid"]
    # The next link keeps the listing's filters (as Nova's does).
    filtered = m.p.call("GET", "/v2.1/os-migrations?migration_type=migration&limit=1").json
    href = filtered["migrations_links"][0]["href"]
    assert "migration_type=migration" in href and f"marker={filtered['migrations'][0]['uuid']}" in href
    old = m.p.call("GET", "/v2.1/os-migrations", headers={"OpenStack-API-Version": "compute 2.1"}).json
    assert "migration_type" not in old["migrations"][0] and "uuid" not in old["migrations"][0]
    assert isinstance(old["migrations"][0]["id"], int)
    assert m.p.call("GET", "/v2.1/os-migrations", headers={"X-Auth-Token": "alice"}).status_code == 403
    assert m.p.call("GET", "/v2.1/os-migrations?limit=1&marker=nope").status_code == 400


def test_ids_before_2_53_are_stable_integers(moves):
    m = moves
    old = {"OpenStack-API-Version": "compute 2.52"}
    listed = m.p.call("GET", "/v2.1/os-services", headers=old).json["services"]
    assert all(isinstance(s["id"], int) for s in listed)
    by_host = {s["host"]: s["id"] for s in listed if s["binary"] == "nova-compute"}
    alone = m.p.call("GET", "/v2.1/os-services?host=host3", headers=old).json["services"]
    assert [s["id"] for s in alone] == [by_host["host3"]]  # not its position in the list
    hyps = m.p.call("GET", "/v2.1/os-hypervisors/detail", headers=old).json["hypervisors"]
    h3, = [h for h in hyps if h["hypervisor_hostname"] == "host3"]
    assert h3["service"]["id"] == by_host["host3"]
    one = m.p.call("GET", f"/v2.1/os-hypervisors/{h3['id']}", headers=old)
    assert one.status_code == 200 and one.json["hypervisor"]["hypervisor_hostname"] == "host3"


def test_a_plane_without_move_tasks_refuses_moves_with_409(moves):
    m = moves
    uuid = m.boot()
    client = falcon.testing.TestClient(make_app(dataclasses.replace(m.p.plane.deps, moves=None)))

    def act(body):
        return client.simulate_post(f"/v2.1/servers/{uuid}/action", body=orjson.dumps(body),
                                    headers={**ADMIN, "Content-Type": "application/json"})

    r = act({"migrate": None})
    assert r.status_code == 409 and "moves are not available" in r.json["conflictingRequest"]["message"]
    assert act({"reboot": {}}).status_code == 400
    assert m.server(uuid)["status"] == "ACTIVE" and m.migrations(uuid) == []


def test_a_failed_build_closes_its_create_action_with_an_error(plane_factory):
    p = plane_factory(computes=0, build_attempts=1)
    p.d.compute("host1", config=FakeConfig(vcpus=16, memory_mb=32768, disk_gb=500, failure_rate=1.0))
    p.flavor()
    uuid = p.boot()
    wait_for(lambda: p.status(uuid) == "ERROR", what="ERROR")
    listed, = p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions").json["instanceActions"]
    assert listed["action"] == "create" and listed["message"] == "Error"
    one = p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions/{listed['request_id']}").json["instanceAction"]
    assert [(e["event"], e["result"]) for e in one["events"]] == [
        ("conductor_schedule_and_build_instances", "Success"), ("compute__do_build_and_run_instance", "Error")]
    assert one["events"][1]["finish_time"] and one["events"][1]["host"] == "host1"


def test_move_bodies_follow_the_microversion(moves):
    m = moves
    uuid = m.boot()
    assert m.act(uuid, {"migrate": {"host": "host2"}}, version="2.55").status_code == 400
    assert m.act(uuid, {"evacuate": {"onSharedStorage": False}}, version="2.14").status_code == 400
    assert m.act(uuid, {"evacuate": {}}, version="2.13").status_code == 400
    r = m.act(uuid, {"migrate": {"host": "host3"}}, version="2.56")
    assert r.status_code == 202, r.text
    assert m.settled(uuid, "VERIFY_RESIZE")["OS-EXT-SRV-ATTR:host"] == "host3"


def test_a_migration_keeps_the_server_group_apart(moves):
    """Anti-affinity holds through a move: the RAM weigher alone would send
    host1's member to host2, where the other member runs; host3 it must be."""
    m = moves
    r = m.p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "apart", "policy": "anti-affinity"}})
    assert r.status_code == 200, r.text
    group = r.json["server_group"]["id"]
    members = []
    for i in range(2):
        r = m.p.call("POST", "/v2.1/servers", {"server": {"name": f"apart-{i}", "flavorRef": "1",
                                                          "imageRef": "cirros", "networks": "none"},
                                               "os:scheduler_hints": {"group": group}})
        assert r.status_code == 202, r.text
        members.append(r.json["server"]["id"])
        m.settled(members[-1], "ACTIVE")
    hosts = [m.server(u)["OS-EXT-SRV-ATTR:host"] for u in members]
    assert hosts == ["host1", "host2"]
    assert m.act(members[0], {"migrate": None}).status_code == 202
    assert m.settled(members[0], "VERIFY_RESIZE")["OS-EXT-SRV-ATTR:host"] == "host3"


def test_instance_actions_page_and_filter_by_time_from_2_58(moves):
    m = moves
    uuid = m.boot()
    assert m.act(uuid, {"migrate": None}).status_code == 202
    m.settled(uuid, "VERIFY_RESIZE")
    assert m.act(uuid, {"confirmResize": None}).status_code == 204
    m.settled(uuid, "ACTIVE")
    path = f"/v2.1/servers/{uuid}/os-instance-actions"

    def get(query: str, version: str = "2.66"):
        return m.p.call("GET", f"{path}{query}", headers={"OpenStack-API-Version": f"compute {version}"})

    everything = get("").json
    assert [a["action"] for a in everything["instanceActions"]] == ["confirmResize", "migrate", "create"]
    assert "links" not in everything
    # A client following the next links gets every action once, newest first.
    seen, query = [], "?limit=2"
    while True:
        r = get(query)
        assert r.status_code == 200, r.text
        seen += r.json["instanceActions"]
        links = r.json.get("links")
        if not links:
            break
        assert links[0]["rel"] == "next" and len(r.json["instanceActions"]) == 2
        query = "?" + links[0]["href"].split("?", 1)[1]
    assert seen == everything["instanceActions"]
    # Before 2.58 the listing takes no query: everything, no links.
    old = get("?limit=1&marker=nope", version="2.57").json
    assert len(old["instanceActions"]) == 3 and "links" not in old
    # Bad input is a 400 in Nova's words.
    assert "could not be found" in get("?marker=req-nope").json["badRequest"]["message"]
    assert get("?limit=-1").status_code == 400 and get("?limit=x").status_code == 400
    assert get("?changes-since=yesterday").status_code == 400
    # changes-since / changes-before keep the actions updated in that window (by updated_at).
    # (MariaDB keeps whole seconds, so two actions may share a stamp.)
    stamps = sorted(a["updated_at"] for a in everything["instanceActions"])
    assert get(f"?changes-since={stamps[-1]}").json["instanceActions"] == [
        a for a in everything["instanceActions"] if a["updated_at"] == stamps[-1]]
    assert get(f"?changes-before={stamps[0]}").json["instanceActions"] == [
        a for a in everything["instanceActions"] if a["updated_at"] == stamps[0]]
    assert get("?changes-since=2999-01-01T00:00:00Z").json["instanceActions"] == []
    assert get("?changes-before=2001-01-01T00:00:00Z").json["instanceActions"] == []
    assert get(f"?changes-before={stamps[0]}", version="2.65").json["instanceActions"] == everything["instanceActions"]
    r = get("?changes-since=2001-01-02T00:00:00Z&changes-before=2001-01-01T00:00:00Z")
    assert r.status_code == 400 and "changes-since must be less than" in r.json["badRequest"]["message"], r.text
    filtered = get(f"?changes-since={stamps[0]}&limit=1").json
    assert "changes-since=" in filtered["links"][0]["href"]


def _conforms(response, template: str, method: str = "get") -> None:
    """The answer is one the compute API's OpenAPI document lists for the call."""
    document = openapi.document()
    described = document["paths"][template][method]["responses"][str(response.status_code)]
    if "content" not in described:
        assert not response.content, response.text
        return
    schema = {**described["content"]["application/json"]["schema"], "components": document["components"]}
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(response.json)]
    assert not errors, (template, response.text, errors)


@pytest.mark.parametrize("version", ["2.1", "2.23", "2.59", "2.90"])
def test_move_answers_are_the_documents(moves, version):
    """What the schema-driven fuzz cannot reach (its plane has no computes):
    a move in flight, its migrations and actions, as the document says."""
    m = moves
    uuid = m.boot()
    headers = {"OpenStack-API-Version": f"compute {version}"}
    m.drivers["host2"].gate.clear()
    body = ({"host": None, "block_migration": "auto"} if version not in ("2.1", "2.23")
            else {"host": None, "block_migration": False, "disk_over_commit": False})
    r = m.act(uuid, {"os-migrateLive": body}, version=version)
    assert r.status_code == 202, r.text
    _conforms(r, "/v2.1/servers/{server_id}/action", "post")
    wait_for(m.drivers["host2"].waiting.is_set, what="the destination to start")
    listed = m.p.call("GET", f"/v2.1/servers/{uuid}/migrations", headers=headers)
    if version == "2.1":
        assert listed.status_code == 404
    else:
        _conforms(listed, "/v2.1/servers/{server_id}/migrations")
        live, = listed.json["migrations"]
        _conforms(m.p.call("GET", f"/v2.1/servers/{uuid}/migrations/{live['id']}", headers=headers),
                  "/v2.1/servers/{server_id}/migrations/{migration_id}")
    _conforms(m.p.call("GET", "/v2.1/os-migrations", headers=headers), "/v2.1/os-migrations")
    m.drivers["host2"].gate.set()
    m.settled(uuid, "ACTIVE")
    _conforms(m.p.call("GET", "/v2.1/os-migrations", headers=headers), "/v2.1/os-migrations")
    actions = m.p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions", headers=headers)
    _conforms(actions, "/v2.1/servers/{server_id}/os-instance-actions")
    for action in actions.json["instanceActions"]:
        for token in ("admin", f"bob:{m.p.call('GET', f'/v2.1/servers/{uuid}').json['server']['tenant_id']}"):
            one = m.p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions/{action['request_id']}",
                           headers={**headers, "X-Auth-Token": token})
            assert one.status_code == 200, one.text
            _conforms(one, "/v2.1/servers/{server_id}/os-instance-actions/{request_id}")
    r = m.act(uuid, {"migrate": None}, version=version)
    assert r.status_code == 202, r.text
    _conforms(r, "/v2.1/servers/{server_id}/action", "post")
    m.settled(uuid, "VERIFY_RESIZE")
    r = m.act(uuid, {"confirmResize": None}, version=version)
    assert r.status_code == 204, r.text
    _conforms(r, "/v2.1/servers/{server_id}/action", "post")
    _conforms(m.p.call("GET", "/v2.1/os-migrations", headers=headers), "/v2.1/os-migrations")


def anti_affinity_pair(m: Moves) -> list[str]:
    """Two ACTIVE members of a new anti-affinity group."""
    r = m.p.call("POST", "/v2.1/os-server-groups", {"server_group": {"name": "apart", "policy": "anti-affinity"}})
    assert r.status_code == 200, r.text
    group = r.json["server_group"]["id"]
    members = [m.p.boot(name=f"apart-{i}", flavor="1", hints={"group": group}) for i in range(2)]
    for uuid in members:
        m.settled(uuid, "ACTIVE")
    return members


def decided_together(m: Moves, members: list[str], act) -> dict[str, object]:
    """``act(uuid)`` for each member at once, in a thread each; per member,
    what it returned or the MoveRefused it raised. The scheduler's look at
    where members are waits at a barrier until both have looked, so two
    decisions made without the group's lock see the same picture (one that
    waits on the lock breaks the barrier after 2 s and goes on)."""
    catalog = m.p.plane.scheduler.catalog
    real_locate = catalog.locate
    barrier = threading.Barrier(len(members), timeout=2.0)

    def locate(wanted):
        found = real_locate(wanted)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        return found

    outcomes: dict[str, object] = {}

    def one(uuid: str) -> None:
        try:
            outcomes[uuid] = act(uuid)
        except MoveRefused as exc:
            outcomes[uuid] = exc

    catalog.locate = locate
    try:
        threads = [threading.Thread(target=one, args=(u,)) for u in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        del catalog.locate
    return outcomes


@pytest.mark.parametrize("move", ["migrate", "live"])
def test_members_moved_at_once_stay_apart(moves, move):
    """Two anti-affinity members (host1, host2) moved together: host3 is the
    one host free of both, so two decisions on the same picture would both
    choose it. Each move decides and allocates under the group's lock, so
    the second sees the first on host3 and goes elsewhere or is refused
    (the barrier lets each look at the members only once the other has
    too, unless one is waiting on the lock)."""
    m = moves
    members = anti_affinity_pair(m)
    assert [m.server(u)["OS-EXT-SRV-ATTR:host"] for u in members] == ["host1", "host2"]

    def move_one(uuid: str):
        return m.p.plane.moves.resize(uuid) if move == "migrate" else m.p.plane.moves.live_migrate(uuid)

    outcomes = decided_together(m, members, move_one)
    moved = [o for o in outcomes.values() if isinstance(o, MoveAccepted)]
    assert moved, outcomes
    destinations = [o.dest_host for o in moved]
    assert len(set(destinations)) == len(destinations), outcomes
    settled = "VERIFY_RESIZE" if move == "migrate" else "ACTIVE"
    where = {}
    for uuid in members:
        if isinstance(outcomes[uuid], MoveAccepted):
            where[uuid] = m.settled(uuid, settled)["OS-EXT-SRV-ATTR:host"]
            assert where[uuid] == outcomes[uuid].dest_host
            assert m.held(uuid) == m.on(where[uuid], SMALL)
        else:  # refused: still where it was, holding what it held
            where[uuid] = m.settled(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
            assert m.held(uuid) == m.on(where[uuid], SMALL)
    assert len(set(where.values())) == 2, where
