"""Response bodies in Nova's shapes, for the negotiated microversion."""
from __future__ import annotations

import datetime as dt
import hashlib
import re
from urllib.parse import quote

from billeting.api.compute.microversion import Version
from billeting.apidb.build_requests import BuildRequest
from billeting.apidb.flavors import StoredFlavor
from billeting.cells import services as svc
from billeting.cells.instances import Fault, InstanceRecord
from billeting.scheduler.nova import Flavor

# Our binaries are ``billeting-compute``/``billeting-conductor``; the API shows
# Nova's names because clients match on them (openstacksdk, the legacy
# ``PUT /os-services/disable`` body, ``?binary=nova-compute`` filters).
NOVA_BINARY = {svc.COMPUTE: "nova-compute", svc.CONDUCTOR: "nova-conductor"}

# vm_state (and task_state while active) → the status users see.
_STATUS = {"building": "BUILD", "active": "ACTIVE", "resized": "VERIFY_RESIZE", "error": "ERROR",
           "deleted": "DELETED", "stopped": "SHUTOFF", "shelved": "SHELVED",
           "shelved_offloaded": "SHELVED_OFFLOADED"}
_ACTIVE_TASKS = {"migrating": "MIGRATING", "rebuilding": "REBUILD", "resize_prep": "RESIZE",
                 "resize_migrating": "RESIZE", "resize_migrated": "RESIZE", "resize_finish": "RESIZE",
                 "resize_reverting": "REVERT_RESIZE", "resize_confirming": "VERIFY_RESIZE"}
# Nova's power states: 1 running, 4 shut down, 0 no state (no guest anywhere).
_POWER = {"active": 1, "resized": 1, "stopped": 4, "shelved": 4}
# A rebuild shows REBUILD whatever the state it started from.
_ANY_STATE_TASKS = {"rebuild_spawning": "REBUILD"}


def status(vm_state: str, task_state: str | None) -> str:
    if vm_state == "resized" and task_state == "resize_reverting":
        return "REVERT_RESIZE"
    if task_state in _ANY_STATE_TASKS:
        return _ANY_STATE_TASKS[task_state]
    if vm_state == "active" and task_state in _ACTIVE_TASKS:
        return _ACTIVE_TASKS[task_state]
    if vm_state == "active" and task_state == "deleting":
        return "ACTIVE"
    return _STATUS.get(vm_state, "UNKNOWN")


def iso(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # (isoformat writes the same, several times faster: a listing writes thousands)
        return value.isoformat(timespec="seconds") + "Z"
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_micro(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.isoformat(timespec="microseconds")
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")


def host_id(project_id: str, host: str | None) -> str:
    """Nova's opaque per-project host digest."""
    if not host:
        return ""
    return hashlib.sha224((project_id + host).encode()).hexdigest()


_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def link(base: str, *parts: str) -> list[dict]:
    # Quoted: a flavor id may hold a space, which a URI may not (uuids need nothing).
    path = "/".join(part if _UNRESERVED.fullmatch(part) else quote(part, safe="") for part in parts)
    return [{"rel": "self", "href": f"{base}/v2.1/{path}"}, {"rel": "bookmark", "href": f"{base}/{path}"}]


def flavor_in_server(flavor: Flavor, flavorid: str | None, version: Version, base: str) -> dict:
    if version.at_least(47):
        return {"vcpus": flavor.vcpus, "ram": flavor.memory_mb, "disk": flavor.root_gb,
                "ephemeral": flavor.ephemeral_gb, "swap": flavor.swap, "original_name": flavor.name,
                "extra_specs": dict(flavor.extra_specs)}
    fid = flavorid or flavor.name
    return {"id": fid, "links": [{"rel": "bookmark", "href": f"{base}/flavors/{quote(fid, safe='')}"}]}  # < 2.47


def fault(found: Fault, *, is_admin: bool) -> dict:
    body = {"code": found.code, "message": found.message, "created": iso(found.created_at)}
    if is_admin or found.code != 500:
        body["details"] = found.details
    return body


def _common(*, uuid: str, name: str, project_id: str, user_id: str, status_: str, vm_state: str,
            task_state: str | None, host: str | None, node: str | None, az: str | None, created: dt.datetime,
            updated: dt.datetime, launched: dt.datetime | None, flavor: Flavor, image_id: str | None,
            version: Version, base: str, is_admin: bool, flavorid: str | None,
            locked_reason: str | None = None, locked: bool = False) -> dict:
    body = {
        "id": uuid, "name": name, "status": status_, "tenant_id": project_id, "user_id": user_id,
        "metadata": {}, "hostId": host_id(project_id, host),
        "image": {"id": image_id, "links": [{"rel": "bookmark", "href": f"{base}/images/{image_id}"}]}
        if image_id else "",
        "flavor": flavor_in_server(flavor, flavorid, version, base),
        "created": iso(created), "updated": iso(updated), "addresses": {}, "accessIPv4": "", "accessIPv6": "",
        "links": link(base, "servers", uuid), "OS-DCF:diskConfig": "MANUAL", "progress": 0,
        "OS-EXT-AZ:availability_zone": az or "", "config_drive": "", "key_name": None,
        "OS-SRV-USG:launched_at": iso_micro(launched), "OS-SRV-USG:terminated_at": None,
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


def server_from_record(record: InstanceRecord, fault_: Fault | None, *, version: Version, base: str,
                       is_admin: bool, flavorid: str | None = None) -> dict:
    vm_state, task_state = str(record.vm_state.value if hasattr(record.vm_state, "value") else record.vm_state), \
        (str(record.task_state.value) if record.task_state is not None and hasattr(record.task_state, "value")
         else record.task_state)
    body = _common(uuid=record.uuid, name=record.name, project_id=record.project_id, user_id=record.user_id,
                   status_=status(vm_state, task_state), vm_state=vm_state, task_state=task_state,
                   host=record.host, node=record.node, az=record.availability_zone, created=record.created_at,
                   updated=record.updated_at, launched=record.launched_at, flavor=record.flavor,
                   image_id=record.image.id if record.image else None, version=version, base=base,
                   is_admin=is_admin, flavorid=flavorid, locked=record.locked_by is not None,
                   locked_reason=record.locked_reason)
    if record.deleted_at is not None:
        body["OS-SRV-USG:terminated_at"] = iso_micro(record.deleted_at)
    if vm_state in ("error", "deleted") and fault_ is not None:
        body["fault"] = fault(fault_, is_admin=is_admin)
    return body


def server_from_build_request(br: BuildRequest, *, version: Version, base: str, is_admin: bool,
                              flavorid: str | None = None) -> dict:
    return _common(uuid=br.instance_uuid, name=br.name, project_id=br.project_id, user_id=br.user_id,
                   status_="BUILD", vm_state="building", task_state="scheduling", host=None, node=None,
                   az=br.availability_zone, created=br.created_at, updated=br.created_at, launched=None,
                   flavor=br.flavor, image_id=br.image.id if br.image else None, version=version, base=base,
                   is_admin=is_admin, flavorid=flavorid)


def flavor(f: StoredFlavor, *, version: Version, base: str, detail: bool = True) -> dict:
    body: dict = {"id": f.flavorid, "name": f.name, "links": link(base, "flavors", f.flavorid)}
    if version.at_least(55):
        body["description"] = f.description
    if not detail:
        return body
    body.update({
        "ram": f.memory_mb, "vcpus": f.vcpus, "disk": f.root_gb, "OS-FLV-EXT-DATA:ephemeral": f.ephemeral_gb,
        "OS-FLV-DISABLED:disabled": f.disabled, "swap": f.swap if (f.swap or version.at_least(75)) else "",
        "rxtx_factor": f.rxtx_factor, "os-flavor-access:is_public": f.is_public})
    if version.at_least(61):
        body["extra_specs"] = dict(f.extra_specs)
    return body
