"""Server bodies (``views.ServerBodies``) against the builder they replaced,
kept here as the reference: one body per server, built field by field for
the microversion on every call.

The listing builds its bodies from the rows it merged (``cells.listing``,
a build request's or a record's row), with what depends on the request
worked out once; whatever the path, the JSON written must be the same,
byte for byte, at every microversion that changes a server's body.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import re
from urllib.parse import quote

import orjson
import pytest

from billeting.api.compute import server_listing, views
from billeting.api.compute.microversion import Version
from billeting.apidb.build_requests import BuildRequest
from billeting.cells.instances import Fault, InstanceRecord, TaskState, VmState
from billeting.cells.messages import RequestSummary
from billeting.scheduler.nova import Flavor, Image

# --- the reference: the builder as it was, one server at a time ---------------------------

_STATUS = {"building": "BUILD", "active": "ACTIVE", "resized": "VERIFY_RESIZE", "error": "ERROR",
           "deleted": "DELETED", "stopped": "SHUTOFF", "shelved": "SHELVED",
           "shelved_offloaded": "SHELVED_OFFLOADED"}
_ACTIVE_TASKS = {"migrating": "MIGRATING", "rebuilding": "REBUILD", "resize_prep": "RESIZE",
                 "resize_migrating": "RESIZE", "resize_migrated": "RESIZE", "resize_finish": "RESIZE",
                 "resize_reverting": "REVERT_RESIZE", "resize_confirming": "VERIFY_RESIZE"}
_POWER = {"active": 1, "resized": 1, "stopped": 4, "shelved": 4}
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def ref_status(vm_state: str, task_state: str | None) -> str:
    if vm_state == "resized" and task_state == "resize_reverting":
        return "REVERT_RESIZE"
    if task_state == "rebuild_spawning":
        return "REBUILD"
    if vm_state == "active" and task_state in _ACTIVE_TASKS:
        return _ACTIVE_TASKS[task_state]
    if vm_state == "active" and task_state == "deleting":
        return "ACTIVE"
    return _STATUS.get(vm_state, "UNKNOWN")


def ref_iso(value):
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def ref_iso_micro(value):
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%f")


def ref_link(base, *parts):
    path = "/".join(part if _UNRESERVED.fullmatch(part) else quote(part, safe="") for part in parts)
    return [{"rel": "self", "href": f"{base}/v2.1/{path}"}, {"rel": "bookmark", "href": f"{base}/{path}"}]


def ref_flavor(flavor: Flavor, flavorid, version: Version, base: str) -> dict:
    if version.at_least(47):
        return {"vcpus": flavor.vcpus, "ram": flavor.memory_mb, "disk": flavor.root_gb,
                "ephemeral": flavor.ephemeral_gb, "swap": flavor.swap, "original_name": flavor.name,
                "extra_specs": dict(flavor.extra_specs)}
    fid = flavorid or flavor.name
    return {"id": fid, "links": [{"rel": "bookmark", "href": f"{base}/flavors/{quote(fid, safe='')}"}]}


def ref_common(*, uuid, name, project_id, user_id, vm_state, task_state, host, node, az, created, updated,
               launched, flavor, image_id, version, base, is_admin, flavorid, locked_reason=None,
               locked=False) -> dict:
    body = {
        "id": uuid, "name": name, "status": ref_status(vm_state, task_state), "tenant_id": project_id,
        "user_id": user_id, "metadata": {},
        "hostId": hashlib.sha224((project_id + host).encode()).hexdigest() if host else "",
        "image": {"id": image_id, "links": [{"rel": "bookmark", "href": f"{base}/images/{image_id}"}]}
        if image_id else "",
        "flavor": ref_flavor(flavor, flavorid, version, base),
        "created": ref_iso(created), "updated": ref_iso(updated), "addresses": {}, "accessIPv4": "",
        "accessIPv6": "", "links": ref_link(base, "servers", uuid), "OS-DCF:diskConfig": "MANUAL", "progress": 0,
        "OS-EXT-AZ:availability_zone": az or "", "config_drive": "", "key_name": None,
        "OS-SRV-USG:launched_at": ref_iso_micro(launched), "OS-SRV-USG:terminated_at": None,
        "OS-EXT-STS:task_state": task_state, "OS-EXT-STS:vm_state": vm_state,
        "OS-EXT-STS:power_state": _POWER.get(vm_state, 0), "os-extended-volumes:volumes_attached": [],
        "security_groups": [],
    }
    if is_admin:
        body["OS-EXT-SRV-ATTR:host"] = host
        body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = node
        body["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{uuid[:8]}"
    if version.at_least(9):
        body["locked"] = locked
    if version.at_least(19):
        body["description"] = None
    if version.at_least(26):
        body["tags"] = []
    if version.at_least(73):
        body["locked_reason"] = locked_reason
    if version.at_least(16):
        body["host_status"] = "" if host is None else "UP"
    return body


def ref_from_record(record: InstanceRecord, fault: Fault | None, *, version, base, is_admin, flavorid) -> dict:
    vm_state = record.vm_state.value
    task_state = record.task_state.value if record.task_state is not None else None
    body = ref_common(uuid=record.uuid, name=record.name, project_id=record.project_id, user_id=record.user_id,
                      vm_state=vm_state, task_state=task_state, host=record.host, node=record.node,
                      az=record.availability_zone, created=record.created_at, updated=record.updated_at,
                      launched=record.launched_at, flavor=record.flavor,
                      image_id=record.image.id if record.image else None, version=version, base=base,
                      is_admin=is_admin, flavorid=flavorid, locked=record.locked_by is not None,
                      locked_reason=record.locked_reason)
    if record.deleted_at is not None:
        body["OS-SRV-USG:terminated_at"] = ref_iso_micro(record.deleted_at)
    if vm_state in ("error", "deleted") and fault is not None:
        body["fault"] = {"code": fault.code, "message": fault.message, "created": ref_iso(fault.created_at)}
        if is_admin or fault.code != 500:
            body["fault"]["details"] = fault.details
    return body


def ref_from_build_request(br: BuildRequest, *, version, base, is_admin, flavorid) -> dict:
    return ref_common(uuid=br.instance_uuid, name=br.name, project_id=br.project_id, user_id=br.user_id,
                      vm_state="building", task_state="scheduling", host=None, node=None,
                      az=br.availability_zone, created=br.created_at, updated=br.created_at, launched=None,
                      flavor=br.flavor, image_id=br.image.id if br.image else None, version=version, base=base,
                      is_admin=is_admin, flavorid=flavorid)


# --- representative servers -----------------------------------------------------------------

BASE_URL = "http://compute.example:8774"
VERSIONS = (1, 3, 9, 16, 26, 47, 69, 73, 91)
FLAVOR_IDS = {"m1.small": "2", "odd name": "odd id/1"}
T0 = dt.datetime(2030, 5, 6, 7, 8, 9)
SMALL = Flavor(vcpus=1, memory_mb=2048, root_gb=20, name="m1.small")
ODD = Flavor(vcpus=4, memory_mb=8192, root_gb=80, ephemeral_gb=10, swap=512, name="odd name",
             extra_specs={"hw:cpu_policy": "dedicated", "trait:CUSTOM_X": "required"})
UNLISTED = Flavor(vcpus=2, memory_mb=1024, name="gone")  # a flavor deleted since: shown by name


def record(n: int, *, vm: VmState, task: TaskState | None = None, host: str | None = "host1",
           flavor: Flavor = SMALL, image: Image | None = Image(id="cirros", disk_format="qcow2"),
           az: str | None = "az1", launched: dt.datetime | None = T0, deleted: dt.datetime | None = None,
           locked_by: str | None = None, locked_reason: str | None = None, micro: int = 0,
           uuid: str | None = None) -> InstanceRecord:
    created = T0.replace(microsecond=micro)
    return InstanceRecord(
        uuid=uuid or f"{n:08x}-1111-4222-8333-444455556666", name=f"vm-{n}", project_id=f"project{n % 2}",
        user_id="user1", vm_state=vm, task_state=task, host=host, node=f"{host}.nodes" if host else None,
        compute_node_uuid=None, availability_zone=az, flavor=flavor, image=image,
        request=RequestSummary(project_id=f"project{n % 2}", user_id="user1"), selection=None, alternates=(),
        num_attempts=1, hosts_tried=(), last_failure=None, created_at=created,
        updated_at=created + dt.timedelta(seconds=n, microseconds=999_999), launched_at=launched,
        deleted_at=deleted, locked_by=locked_by, locked_reason=locked_reason)


RECORDS = [
    record(1, vm=VmState.ACTIVE),
    record(2, vm=VmState.ACTIVE, task=TaskState.MIGRATING, flavor=ODD, image=None, az=None, micro=1),
    record(3, vm=VmState.BUILDING, task=TaskState.SCHEDULING, launched=None),
    record(4, vm=VmState.BUILDING, task=TaskState.SPAWNING, host=None, launched=None, flavor=UNLISTED),
    record(5, vm=VmState.ERROR, host=None, launched=None),
    record(6, vm=VmState.DELETED, deleted=T0 + dt.timedelta(hours=1, microseconds=5)),
    record(7, vm=VmState.RESIZED, task=TaskState.RESIZE_REVERTING, flavor=ODD),
    record(8, vm=VmState.STOPPED, locked_by="owner", locked_reason="maintenance"),
    record(9, vm=VmState.SHELVED_OFFLOADED, host=None, locked_by="admin"),
    record(10, vm=VmState.ACTIVE, task=TaskState.REBUILD_SPAWNING, image=Image(id="")),
    record(11, vm=VmState.ACTIVE, uuid="not a uuid+/x"),  # (quoted in links)
]
FAULTS = {RECORDS[4].uuid: Fault(code=500, message="No valid host", details="trace", created_at=T0),
          RECORDS[5].uuid: Fault(code=409, message="a later fault", details="why", created_at=T0),
          RECORDS[0].uuid: Fault(code=500, message="old, shown only in error or deleted", created_at=T0)}
BUILD_REQUESTS = [
    BuildRequest(instance_uuid="bbbbbbbb-1111-4222-8333-444455556666", project_id="project1", user_id="user2",
                 name="queued", flavor=ODD, image=Image(id="fedora"), availability_zone=None,
                 created_at=T0.replace(microsecond=250)),
    BuildRequest(instance_uuid="cccccccc-1111-4222-8333-444455556666", project_id="project0", user_id="user2",
                 name="bfv", flavor=SMALL, image=None, availability_zone="az2", created_at=T0),
]


def _ids(version: Version) -> dict[str, str]:
    return {} if version.at_least(47) else FLAVOR_IDS


@pytest.mark.parametrize("minor", VERSIONS)
@pytest.mark.parametrize("is_admin", (True, False))
def test_bodies_are_those_of_the_reference_builder_byte_for_byte(minor, is_admin):
    version = Version(2, minor)
    ids = _ids(version)
    # one builder for the whole page, as a listing uses it (its caches shared by all the bodies)
    view = views.ServerBodies(version=version, base=BASE_URL, is_admin=is_admin, flavor_ids=ids)
    for rec in RECORDS:
        fault = FAULTS.get(rec.uuid)
        want = ref_from_record(rec, fault, version=version, base=BASE_URL, is_admin=is_admin,
                               flavorid=ids.get(rec.flavor.name))
        got = view.detail(server_listing.row_of_record(rec, "cell1"), fault)
        assert orjson.dumps(got) == orjson.dumps(want), (minor, is_admin, rec.uuid)
        index = view.index(rec.uuid, rec.name)
        assert orjson.dumps(index) == orjson.dumps(
            {"id": rec.uuid, "name": rec.name, "links": ref_link(BASE_URL, "servers", rec.uuid)})
    for br in BUILD_REQUESTS:
        want = ref_from_build_request(br, version=version, base=BASE_URL, is_admin=is_admin,
                                      flavorid=ids.get(br.flavor.name))
        got = view.detail(server_listing.row_of_build_request(br))
        assert orjson.dumps(got) == orjson.dumps(want), (minor, is_admin, br.instance_uuid)


def test_the_microversions_tested_change_the_bodies():
    """(the versions above are each where a body changes: none of them is idle)"""
    shown = []
    for minor in VERSIONS:
        view = views.ServerBodies(version=Version(2, minor), base=BASE_URL, is_admin=True,
                                  flavor_ids=_ids(Version(2, minor)))
        shown.append(orjson.dumps(view.detail(server_listing.row_of_record(RECORDS[7], "cell1"))))
    changed = {VERSIONS[i] for i in range(1, len(VERSIONS)) if shown[i] != shown[i - 1]}
    assert changed == {9, 16, 26, 47, 73}, changed  # (2.3 and 2.69 change nothing of a cell's server)
