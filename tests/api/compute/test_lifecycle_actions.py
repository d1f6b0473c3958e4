"""The lifecycle actions end to end: HTTP → compute API → the real
lifecycle tasks → the cell's computes, with what Placement holds for the
server checked after every step (its allocations, the hosts' usages)."""
from __future__ import annotations

import time

import msgspec
import pytest

from billeting.apidb import images
from billeting.cells import instances as inst
from billeting.conductor.reschedule import EXHAUSTED
from tests.api.compute.test_server_actions import SMALL, Moves, _conforms, anti_affinity_pair, decided_together
from tests.support.wait import wait_for

ACTION = "/v2.1/servers/{server_id}/action"


@pytest.fixture
def life(plane_factory):
    m = Moves(plane_factory(computes=0))
    images.put(m.p.api_engine, "avx", name="avx", properties={"trait:HW_CPU_X86_AVX2": "required"})
    images.put(m.p.api_engine, "gpu", name="gpu", properties={"trait:CUSTOM_NO_SUCH_GPU": "required"})
    yield m
    for driver in m.drivers.values():
        driver.gate.set()


def owner_token(m: Moves, uuid: str) -> str:
    """A member (not an admin) of the server's project."""
    return f"bob:{m.server(uuid)['tenant_id']}"


def usages(m: Moves, host: str) -> dict:
    return {rc: n for rc, n in m.p.d.placement.provider_usages(m.node(host)).items() if n}


def act_ok(m: Moves, uuid: str, body, status: int = 202, **kw):
    r = m.act(uuid, body, **kw)
    assert r.status_code == status, r.text
    _conforms(r, ACTION, "post")
    return r


def refused(m: Moves, uuid: str, body, status: int, text: str, **kw) -> None:
    r = m.act(uuid, body, **kw)
    assert r.status_code == status, r.text
    _conforms(r, ACTION, "post")
    assert text in r.text, r.text


def test_stop_and_start_keep_the_allocation(life):
    m = life
    uuid = m.boot()
    act_ok(m, uuid, {"os-stop": None})
    body = m.settled(uuid, "SHUTOFF")
    assert body["OS-EXT-STS:vm_state"] == "stopped" and body["OS-EXT-STS:power_state"] == 4
    assert m.held(uuid) == m.on("host1", SMALL) and usages(m, "host1") == SMALL
    refused(m, uuid, {"os-stop": None}, 409, f"Cannot 'stop' instance {uuid} while it is in vm_state stopped")
    refused(m, uuid, {"migrate": None}, 409, "while it is in vm_state stopped")
    act_ok(m, uuid, {"os-start": None})
    assert m.settled(uuid, "ACTIVE")["OS-EXT-STS:power_state"] == 1
    refused(m, uuid, {"os-start": None}, 409, f"Cannot 'start' instance {uuid} while it is in vm_state active")
    assert m.held(uuid) == m.on("host1", SMALL)
    actions = m.actions(uuid)
    for name, event in (("stop", "compute_stop_instance"), ("start", "compute_start_instance")):
        assert [e["event"] for e in actions[name]["events"]] == [event]
        assert actions[name]["events"][0]["result"] == "Success"


def test_shelve_offloads_at_once_and_unshelve_schedules_again(life):
    m = life
    uuid = m.boot()
    assert uuid in m.drivers["host1"].guests()
    act_ok(m, uuid, {"shelve": None})
    body = m.settled(uuid, "SHELVED_OFFLOADED")
    assert body["OS-EXT-SRV-ATTR:host"] is None and body["OS-EXT-STS:power_state"] == 0
    assert m.held(uuid) == {} and usages(m, "host1") == {}
    wait_for(lambda: uuid not in m.drivers["host1"].guests(), what="the guest to be removed")
    refused(m, uuid, {"shelve": None}, 409, "while it is in vm_state shelved_offloaded")
    refused(m, uuid, {"os-start": None}, 409, "while it is in vm_state shelved_offloaded")

    act_ok(m, uuid, {"unshelve": None})
    body = m.settled(uuid, "ACTIVE")
    host = body["OS-EXT-SRV-ATTR:host"]
    assert m.held(uuid) == m.on(host, SMALL) and usages(m, host) == SMALL
    assert uuid in m.drivers[host].guests()
    unshelve = wait_for(lambda: (a := m.actions(uuid)["unshelve"])["events"][0]["result"] and a,
                        what="the unshelve's result")
    assert unshelve["events"][0]["result"] == "Success" and unshelve["message"] is None

    r = m.p.call("DELETE", f"/v2.1/servers/{uuid}")
    assert r.status_code == 204
    wait_for(lambda: m.held(uuid) == {} and usages(m, host) == {}, what="the delete to free the allocation")


def test_shelved_server_stays_on_its_host_until_offloaded(life):
    m = life
    m.p.plane.lifecycle.offload_at_once = False  # Nova's shelved_offload_time = -1
    uuid = m.boot()
    act_ok(m, uuid, {"shelve": None})
    body = m.settled(uuid, "SHELVED")
    assert body["OS-EXT-SRV-ATTR:host"] == "host1" and body["OS-EXT-STS:power_state"] == 4
    assert m.held(uuid) == m.on("host1", SMALL)
    # An availability zone or a host may only be given to an offloaded server.
    refused(m, uuid, {"unshelve": {"availability_zone": "nova"}}, 409, "SHELVED_OFFLOADED", version="2.77")
    act_ok(m, uuid, {"unshelve": None})
    assert m.settled(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"] == "host1"
    assert m.held(uuid) == m.on("host1", SMALL)

    act_ok(m, uuid, {"shelve": None})
    m.settled(uuid, "SHELVED")
    refused(m, uuid, {"shelveOffload": None}, 403, "os_compute_api:os-shelve:shelve_offload",
            token=owner_token(m, uuid))
    act_ok(m, uuid, {"shelveOffload": None})
    m.settled(uuid, "SHELVED_OFFLOADED")
    assert m.held(uuid) == {} and usages(m, "host1") == {}
    refused(m, uuid, {"shelveOffload": None}, 409, "while it is in vm_state shelved_offloaded")


def test_unshelve_to_a_zone_or_host_by_microversion(life):
    m = life
    uuid = m.boot()
    act_ok(m, uuid, {"shelve": None})
    m.settled(uuid, "SHELVED_OFFLOADED")
    refused(m, uuid, {"unshelve": {"availability_zone": "nowhere"}}, 400, "availability zone is not available",
            version="2.77")
    refused(m, uuid, {"unshelve": {}}, 400, "availability_zone", version="2.77")
    refused(m, uuid, {"unshelve": {"host": "host3"}}, 400, "('host' was unexpected)", version="2.90")
    refused(m, uuid, {"unshelve": {"host": "host9"}}, 400, "Compute host host9 could not be found", version="2.91")
    refused(m, uuid, {"unshelve": {"host": "host3"}}, 403, "unshelve_to_host", version="2.91",
            token=owner_token(m, uuid))
    refused(m, uuid, {"unshelve": {"availability_zone": 7}}, 400, "availability_zone", version="2.91")
    assert m.server(uuid)["status"] == "SHELVED_OFFLOADED" and m.held(uuid) == {}
    act_ok(m, uuid, {"unshelve": {"host": "host3", "availability_zone": None}}, version="2.91")
    assert m.settled(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"] == "host3"
    assert m.held(uuid) == m.on("host3", SMALL)


def test_unshelve_retries_on_an_alternate_of_the_cell(life):
    m = life
    uuid = m.boot()
    act_ok(m, uuid, {"shelve": None})
    m.settled(uuid, "SHELVED_OFFLOADED")
    first = m.drivers["host1"]
    first.config = msgspec.structs.replace(first.config, failure_rate=1.0)  # host1 ranks first, and fails
    act_ok(m, uuid, {"unshelve": None})
    body = m.settled(uuid, "ACTIVE")
    assert body["OS-EXT-SRV-ATTR:host"] == "host2"
    assert m.held(uuid) == m.on("host2", SMALL) and usages(m, "host1") == {}


def _fail_everywhere(m: Moves, rate: float = 1.0) -> None:
    for driver in m.drivers.values():
        driver.config = msgspec.structs.replace(driver.config, failure_rate=rate)


def test_unshelve_that_fails_on_every_host_goes_back_offloaded(life):
    """Nova's: a failed unshelve leaves the server SHELVED_OFFLOADED (no host,
    nothing held) with a fault saying why, to be unshelved again; a plain
    build that fails the same way still ends in ERROR."""
    m = life
    uuid = m.boot()
    act_ok(m, uuid, {"shelve": None})
    m.settled(uuid, "SHELVED_OFFLOADED")
    _fail_everywhere(m)  # the chosen host and both alternates
    act_ok(m, uuid, {"unshelve": None})
    wait_for(lambda: (f := inst.latest_fault(m.p.d.cell("cell1").engine, uuid)) is not None
             and f.message == EXHAUSTED, what="the unshelve's fault")
    body = m.settled(uuid, "SHELVED_OFFLOADED")
    assert body["OS-EXT-SRV-ATTR:host"] is None and body["OS-EXT-STS:vm_state"] == "shelved_offloaded"
    assert m.held(uuid) == {} and all(usages(m, host) == {} for host in m.drivers)
    fault = inst.latest_fault(m.p.d.cell("cell1").engine, uuid)
    assert "3 of max_attempts=3" in fault.details and "failure rate" in fault.details
    unshelve = m.actions(uuid)["unshelve"]
    assert unshelve["message"] == "Error" and unshelve["events"][0]["result"] == "Error"

    # The first unshelve's fault must be older than the second action: MariaDB keeps
    # times to the second, and a fault of the action's second counts as its own
    # (action_events._unshelve_failed).
    time.sleep(1.1)
    _fail_everywhere(m, 0.0)  # it can be unshelved again (host1 failing once more: retried on host2)
    m.drivers["host1"].config = msgspec.structs.replace(m.drivers["host1"].config, failure_rate=1.0)
    act_ok(m, uuid, {"unshelve": None})
    assert m.settled(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"] == "host2"
    assert m.held(uuid) == m.on("host2", SMALL)
    act_ok(m, uuid, {"shelve": None})  # offloaded again before anyone read how the unshelve ended
    m.settled(uuid, "SHELVED_OFFLOADED")
    unshelve = m.actions(uuid)["unshelve"]
    assert unshelve["message"] is None and unshelve["events"][0]["result"] == "Success"

    _fail_everywhere(m)  # a plain build
    plain = m.p.boot(flavor="1")
    body = m.settled(plain, "ERROR")
    assert body["fault"]["message"] == EXHAUSTED and m.held(plain) == {}


def test_unshelves_of_anti_affinity_members_at_once_take_distinct_hosts(life):
    """Two members unshelved together on a fleet of two: each decides under
    the group's lock, after the other's claim, so they never share a host.
    Without the lock both would decide on the same picture (the barrier of
    decided_together lets each look at the members only once the other has too)."""
    m = life
    r = m.p.call("PUT", f"/v2.1/os-services/{_service_id(m, 'host3')}", {"status": "disabled"},
                 headers={"OpenStack-API-Version": "compute 2.53"})
    assert r.status_code == 200, r.text
    members = anti_affinity_pair(m)
    for uuid in members:
        act_ok(m, uuid, {"shelve": None})
        m.settled(uuid, "SHELVED_OFFLOADED")

    def unshelve(uuid: str) -> str:
        m.p.plane.lifecycle.unshelve(uuid)
        return "ok"

    outcomes = decided_together(m, members, unshelve)
    hosts = []
    for uuid in members:
        if outcomes[uuid] == "ok":
            hosts.append(m.settled(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"])
            assert m.held(uuid) == m.on(hosts[-1], SMALL)
        else:  # refused: still offloaded, holding nothing
            assert m.settled(uuid, "SHELVED_OFFLOADED") and m.held(uuid) == {}
    assert hosts and len(set(hosts)) == len(hosts), (hosts, outcomes)


def test_unshelve_with_no_room_is_refused_and_stays_offloaded(life):
    m = life
    uuid = m.boot()
    act_ok(m, uuid, {"shelve": None})
    m.settled(uuid, "SHELVED_OFFLOADED")
    for host in m.drivers:  # nothing can take it any more
        m.p.call("PUT", f"/v2.1/os-services/{_service_id(m, host)}", {"status": "disabled"},
                 headers={"OpenStack-API-Version": "compute 2.53"})
    refused(m, uuid, {"unshelve": None}, 400, "No valid host was found")
    body = m.settled(uuid, "SHELVED_OFFLOADED")
    assert body["OS-EXT-STS:task_state"] is None and m.held(uuid) == {}
    assert m.actions(uuid)["unshelve"]["message"] == "Error"


def _service_id(m: Moves, host: str) -> str:
    listed = m.p.call("GET", f"/v2.1/os-services?host={host}",
                      headers={"OpenStack-API-Version": "compute 2.53"}).json["services"]
    return next(s["id"] for s in listed if s["binary"] == "nova-compute")


@pytest.mark.parametrize("version", ["2.1", "2.90"])
def test_rebuild_in_place_rechecks_the_image_traits(life, version):
    m = life
    uuid = m.boot()
    held = m.held(uuid)
    r = act_ok(m, uuid, {"rebuild": {"imageRef": "cirros", "name": "renamed"}}, version=version)
    assert r.json["server"]["id"] == uuid and r.json["server"]["adminPass"]
    body = m.settled(uuid, "ACTIVE")
    assert body["name"] == "renamed" and body["OS-EXT-SRV-ATTR:host"] == "host1" and m.held(uuid) == held

    refused(m, uuid, {"rebuild": {"imageRef": "gpu"}}, 400,
            "Image traits cannot be satisfied by the current resource providers", version=version)
    assert m.server(uuid)["image"]["id"] == "cirros"
    refused(m, uuid, {"rebuild": {"imageRef": "nope"}}, 400, "Image nope could not be found", version=version)
    refused(m, uuid, {"rebuild": {}}, 400, "imageRef", version=version)
    refused(m, uuid, {"rebuild": {"imageRef": "avx", "key_name": "k"}}, 400, "('key_name' was unexpected)",
            version="2.53")

    m.drivers["host1"].gate.clear()
    act_ok(m, uuid, {"rebuild": {"imageRef": "avx"}}, version=version)
    wait_for(m.drivers["host1"].waiting.is_set, what="the respawn to start")
    assert m.server(uuid)["status"] == "REBUILD"
    refused(m, uuid, {"os-stop": None}, 409, "while it is in task_state rebuild_spawning")
    m.drivers["host1"].gate.set()
    body = m.settled(uuid, "ACTIVE")
    assert body["image"]["id"] == "avx" and m.held(uuid) == held
    rebuild = m.actions(uuid)["rebuild"]
    assert rebuild["events"][0]["event"] == "compute_rebuild_instance"
    assert rebuild["events"][0]["result"] == "Success"

    act_ok(m, uuid, {"os-stop": None})
    m.settled(uuid, "SHUTOFF")
    act_ok(m, uuid, {"rebuild": {"imageRef": "cirros"}})
    assert m.settled(uuid, "SHUTOFF")["image"]["id"] == "cirros"  # a stopped server stays stopped


def test_a_locked_server_refuses_non_admins(life):
    m = life
    bob = "bob:p1"  # the server's owner, a member of p1; "admin" is an admin of another project
    r = m.p.call("POST", "/v2.1/servers", {"server": {"name": "vm", "flavorRef": "1", "imageRef": "cirros",
                                                      "networks": "none"}}, headers={"X-Auth-Token": bob})
    assert r.status_code == 202, r.text
    uuid = r.json["server"]["id"]
    m.settled(uuid, "ACTIVE")
    refused(m, uuid, {"lock": {"locked_reason": ""}}, 400, "locked_reason", version="2.73", token=bob)
    refused(m, uuid, {"lock": {"why": "x"}}, 400, "('why' was unexpected)", version="2.73", token=bob)
    act_ok(m, uuid, {"lock": {"locked_reason": "maintenance"}}, version="2.73", token=bob)
    shown = m.server(uuid, version="2.73")
    assert shown["locked"] is True and shown["locked_reason"] == "maintenance"
    refused(m, uuid, {"os-stop": None}, 409, f"Instance {uuid} is locked", token=bob)
    refused(m, uuid, {"resize": {"flavorRef": "2"}}, 409, f"Instance {uuid} is locked", token=bob)
    r = m.p.call("DELETE", f"/v2.1/servers/{uuid}", headers={"X-Auth-Token": bob})
    assert r.status_code == 409 and "is locked" in r.text
    act_ok(m, uuid, {"os-stop": None})  # an admin acts on a locked server
    m.settled(uuid, "SHUTOFF")
    act_ok(m, uuid, {"unlock": None}, token=bob)
    assert m.server(uuid, version="2.73")["locked"] is False
    act_ok(m, uuid, {"os-start": None}, token=bob)
    m.settled(uuid, "ACTIVE")

    act_ok(m, uuid, {"lock": None})  # an admin's lock: the owner may not lift it
    refused(m, uuid, {"unlock": None}, 403, "unlock_override", token=bob)
    act_ok(m, uuid, {"unlock": None})
    names = [a["action"] for a in m.p.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions")
             .json["instanceActions"]]
    assert names.count("lock") == 2 and names.count("unlock") == 2
    assert m.held(uuid) == m.on("host1", SMALL)


def test_another_projects_server_is_not_found_and_building_ones_conflict(life):
    m = life
    uuid = m.boot()
    refused(m, uuid, {"os-stop": None}, 404, "could not be found", token="eve:other")
    refused(m, uuid, {"os-stop": "now"}, 400, "os-stop")
    refused(m, "0" * 8 + "-0000-4000-8000-" + "0" * 12, {"os-stop": None}, 404, "could not be found")
