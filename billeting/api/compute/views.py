"""Response bodies in Nova's shapes, for the negotiated microversion."""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import re
from urllib.parse import quote

from billeting.api.compute.microversion import Version
from billeting.apidb.flavors import StoredFlavor
from billeting.cells import services as svc
from billeting.cells.instances import Fault
from billeting.cells.listing import ListedRow, flavor_of, image_id_of
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
    if value.tzinfo is None:
        # (the same as strftime, several times faster: a listing writes thousands;
        # isoformat without timespec is quicker still, its first 19 characters the seconds)
        return value.isoformat()[:19] + "Z"
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_micro(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # (isoformat leaves out a fraction of 0)
        return value.isoformat() if value.microsecond else value.isoformat() + ".000000"
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")


def host_id(project_id: str, host: str | None) -> str:
    """Nova's opaque per-project host digest."""
    if not host:
        return ""
    return _digest(project_id, host)


# A listing shows each (project, host) pair of its page: the same pairs page
# after page, so they are hashed once per process, not once per body.
@functools.lru_cache(maxsize=1 << 16)
def _digest(project_id: str, host: str) -> str:
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


class ServerBodies:
    """Server bodies for one request: what depends on the microversion, the
    caller's role and the base URL is worked out once (a template body
    whose constant entries every body copies), and the flavor and image
    blocks once per flavor and image, so that a page of a thousand servers
    costs a thousand dict copies and little else. Bodies share those blocks
    and the template's empty containers: they are written out as they are,
    never changed."""

    def __init__(self, *, version: Version, base: str, is_admin: bool, flavor_ids: dict[str, str]) -> None:
        self.base = base
        self.version = version
        self.is_admin = is_admin
        self.flavor_ids = flavor_ids  # name → flavorid, for the flavors bodies show by id (before 2.47)
        self._self = f"{base}/v2.1/servers/"
        self._bookmark = f"{base}/servers/"
        self._locked = version.at_least(9)
        self._host_status = version.at_least(16)
        self._locked_reason = version.at_least(73)
        # by the JSON the rows hold
        self._flavors: dict[str, dict] = {}
        self._images: dict[str | None, dict | str] = {}
        self._template = self._constant_body(version)

    def _constant_body(self, version: Version) -> dict:
        """Every key of a detail body in its order, those that vary per
        server set to None (``detail`` fills them in)."""
        body = dict.fromkeys(("id", "name", "status", "tenant_id", "user_id"))
        body["metadata"] = {}
        body.update(dict.fromkeys(("hostId", "image", "flavor", "created", "updated")))
        body.update({"addresses": {}, "accessIPv4": "", "accessIPv6": "", "links": None,
                     "OS-DCF:diskConfig": "MANUAL", "progress": 0, "OS-EXT-AZ:availability_zone": None,
                     "config_drive": "", "key_name": None})
        body.update(dict.fromkeys(("OS-SRV-USG:launched_at", "OS-SRV-USG:terminated_at", "OS-EXT-STS:task_state",
                                   "OS-EXT-STS:vm_state", "OS-EXT-STS:power_state")))
        body.update({"os-extended-volumes:volumes_attached": [], "security_groups": []})
        if self.is_admin:
            body.update(dict.fromkeys(("OS-EXT-SRV-ATTR:host", "OS-EXT-SRV-ATTR:hypervisor_hostname",
                                       "OS-EXT-SRV-ATTR:instance_name")))
        if self._locked:
            body["locked"] = None
        if version.at_least(19):
            body["description"] = None
        if version.at_least(26):
            body["tags"] = []
        if self._locked_reason:
            body["locked_reason"] = None
        if self._host_status:
            body["host_status"] = None
        return body

    def links(self, uuid: str) -> list[dict]:
        if not _UNRESERVED.fullmatch(uuid):
            return link(self.base, "servers", uuid)
        return [{"rel": "self", "href": self._self + uuid}, {"rel": "bookmark", "href": self._bookmark + uuid}]

    def index(self, uuid: str, name: str) -> dict:
        """An entry of ``GET /servers``."""
        return {"id": uuid, "name": name, "links": self.links(uuid)}

    def _flavor(self, flavor_json: str) -> dict:
        block = self._flavors.get(flavor_json)
        if block is None:
            flavor = flavor_of(flavor_json)
            block = self._flavors[flavor_json] = flavor_in_server(flavor, self.flavor_ids.get(flavor.name),
                                                                  self.version, self.base)
        return block

    def _image(self, image_json: str | None) -> dict | str:
        block = self._images.get(image_json)
        if block is None:
            image_id = image_id_of(image_json) if image_json else None
            block = self._images[image_json] = {
                "id": image_id, "links": [{"rel": "bookmark", "href": f"{self.base}/images/{image_id}"}]} \
                if image_id else ""
        return block

    def detail(self, row: ListedRow, fault_: Fault | None = None) -> dict:
        """An entry of ``GET /servers/detail`` and the body of ``GET
        /servers/{id}``: ``row`` read with every column a detail body shows
        (``cells.listing.DETAIL``); ``fault_`` its newest fault."""
        uuid, project_id, host, vm_state = row.uuid, row.project_id, row.host, row.vm_state
        task_state = row.task_state or None
        deleted_at = row.deleted_at
        image = self._images.get(row.image_json)
        flavor = self._flavors.get(row.flavor_json)  # type: ignore[arg-type]
        body = self._template.copy()
        body["id"] = uuid
        body["name"] = row.name
        body["status"] = status(vm_state, task_state)
        body["tenant_id"] = project_id
        body["user_id"] = row.user_id
        body["hostId"] = _digest(project_id, host) if host else ""
        body["image"] = image if image is not None else self._image(row.image_json)
        body["flavor"] = flavor if flavor is not None else self._flavor(row.flavor_json)  # type: ignore[arg-type]
        body["created"] = iso(row.created_at)
        body["updated"] = iso(row.updated_at)
        body["links"] = self.links(uuid)
        body["OS-EXT-AZ:availability_zone"] = row.availability_zone or ""
        body["OS-SRV-USG:launched_at"] = iso_micro(row.launched_at)
        body["OS-SRV-USG:terminated_at"] = iso_micro(deleted_at) if deleted_at is not None else None
        body["OS-EXT-STS:task_state"] = task_state
        body["OS-EXT-STS:vm_state"] = vm_state
        body["OS-EXT-STS:power_state"] = _POWER.get(vm_state, 0)
        if self.is_admin:
            body["OS-EXT-SRV-ATTR:host"] = host
            body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = row.node
            body["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{uuid[:8]}"
        if self._locked:
            body["locked"] = row.locked_by is not None
        if self._locked_reason:
            body["locked_reason"] = row.locked_reason
        if self._host_status:
            body["host_status"] = "" if host is None else "UP"
        if fault_ is not None and vm_state in SHOWS_FAULT:
            body["fault"] = fault(fault_, is_admin=self.is_admin)
        return body


# The states in which a server's body shows its newest fault.
SHOWS_FAULT = frozenset({"error", "deleted"})


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
