"""Response bodies in Nova's shapes, for the negotiated microversion."""
from __future__ import annotations

import datetime as dt
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
    caller's role and the base URL is worked out once, and the flavor and
    image blocks once per flavor and image, so that a page of a thousand
    servers costs a thousand dicts and little else. Bodies share those
    blocks: they are written out as they are, never changed."""

    def __init__(self, *, version: Version, base: str, is_admin: bool, flavor_ids: dict[str, str]) -> None:
        self.base = base
        self.version = version
        self.is_admin = is_admin
        self.flavor_ids = flavor_ids  # name → flavorid, for the flavors bodies show by id (before 2.47)
        self._self = f"{base}/v2.1/servers/"
        self._bookmark = f"{base}/servers/"
        self._locked = version.at_least(9)
        self._host_status = version.at_least(16)
        self._description = version.at_least(19)
        self._tags = version.at_least(26)
        self._flavor_by_name = not version.at_least(47)
        self._locked_reason = version.at_least(73)
        # by the JSON the rows hold
        self._flavors: dict[str, dict] = {}
        self._images: dict[str | None, dict | str] = {}
        self._host_ids: dict[tuple[str, str], str] = {}

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

    def _host_id(self, project_id: str, host: str | None) -> str:
        if not host:
            return ""
        key = (project_id, host)
        digest = self._host_ids.get(key)
        if digest is None:
            digest = self._host_ids[key] = host_id(project_id, host)
        return digest

    def detail(self, row: ListedRow, fault_: Fault | None = None) -> dict:
        """An entry of ``GET /servers/detail`` and the body of ``GET
        /servers/{id}``: ``row`` read with every column a detail body shows
        (``cells.listing.DETAIL``); ``fault_`` its newest fault."""
        uuid, project_id, host, vm_state = row.uuid, row.project_id, row.host, row.vm_state
        task_state = row.task_state or None
        deleted_at = row.deleted_at
        body = {
            "id": uuid, "name": row.name, "status": status(vm_state, task_state), "tenant_id": project_id,
            "user_id": row.user_id, "metadata": {}, "hostId": self._host_id(project_id, host),
            "image": self._image(row.image_json), "flavor": self._flavor(row.flavor_json),
            "created": iso(row.created_at), "updated": iso(row.updated_at), "addresses": {}, "accessIPv4": "",
            "accessIPv6": "", "links": self.links(uuid), "OS-DCF:diskConfig": "MANUAL", "progress": 0,
            "OS-EXT-AZ:availability_zone": row.availability_zone or "", "config_drive": "", "key_name": None,
            "OS-SRV-USG:launched_at": iso_micro(row.launched_at),
            "OS-SRV-USG:terminated_at": iso_micro(deleted_at) if deleted_at is not None else None,
            "OS-EXT-STS:task_state": task_state, "OS-EXT-STS:vm_state": vm_state,
            "OS-EXT-STS:power_state": _POWER.get(vm_state, 0), "os-extended-volumes:volumes_attached": [],
            "security_groups": [],
        }
        if self.is_admin:
            body["OS-EXT-SRV-ATTR:host"] = host
            body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = row.node
            body["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{uuid[:8]}"
        if self._locked:
            body["locked"] = row.locked_by is not None
        if self._description:
            body["description"] = None
        if self._tags:
            body["tags"] = []
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
