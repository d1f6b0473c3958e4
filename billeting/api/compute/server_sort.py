"""``sort_key``/``sort_dir`` of server listings (``openstack server list
--sort``), as Nova reads them: each may repeat, directions pair with keys in
order (the first one, or ``desc``, for keys without their own), ``host`` and
``node`` are for admins only (403), keys Nova takes but cannot sort on are
dropped silently, and anything else is a 400. Ties end in creation time and
uuid, newest first, like the listing without a sort. Servers without a value
(no host yet) come first in ascending order, last in descending, as NULLs
do in Nova's database."""
from __future__ import annotations

from billeting.api.compute.context import RequestContext
from billeting.api.compute.errors import bad_request, forbidden
from billeting.cells.listing import SortKey

# The cell column (see cells.listing) each key sorts on; a server still
# being scheduled sorts on what its build request says.
_KEYS: dict[str, str] = {
    "display_name": "name",
    "hostname": "name",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "launched_at": "launched_at",
    "terminated_at": "deleted_at",
    "uuid": "uuid",
    "project_id": "project_id",
    "user_id": "user_id",
    "vm_state": "vm_state",
    "task_state": "task_state",
    "power_state": "power_state",
    "availability_zone": "availability_zone",
    "host": "host",
    "node": "node",
}
# What breaks ties (and orders a listing without a sort): newest first.
TIE_BREAKERS = (SortKey(column="created_at", descending=True), SortKey(column="uuid", descending=True))
_ADMIN_ONLY = frozenset({"host", "node"})
# Keys Nova's schema takes that this deployment has nothing to sort on
# (networks, images, keys, metadata it does not keep): accepted, dropped.
_DROPPED = frozenset({
    "access_ip_v4", "access_ip_v6", "auto_disk_config", "config_drive", "display_description", "image_ref",
    "instance_type_id", "kernel_id", "key_name", "launch_index", "locked_by", "progress", "ramdisk_id",
    "root_device_name", "architecture", "cell_name", "cleaned", "default_ephemeral_device",
    "default_swap_device", "deleted", "deleted_at", "disable_terminate", "ephemeral_gb", "ephemeral_key_uuid",
    "id", "key_data", "launched_on", "locked", "memory_mb", "os_type", "reservation_id", "root_gb",
    "shutdown_terminate", "user_data", "vcpus", "vm_mode",
})


def _values(params, name: str) -> list[str]:
    value = params.get(name)
    if value is None:
        return []
    return [v.strip() for v in (value if isinstance(value, list) else [value])]


def order(ctx: RequestContext, params) -> list[SortKey]:
    """The sort the query asks for, most significant first; empty when it
    asks for none."""
    keys, dirs = _values(params, "sort_key"), _values(params, "sort_dir")
    if not keys and not dirs:
        return []
    keys = keys or ["created_at"]  # a direction alone applies to the default key
    for d in dirs:
        if d not in ("asc", "desc"):
            raise bad_request(f"Invalid input for query parameters sort_dir. Value: {d}. "
                              f"'{d}' is not one of ['asc', 'desc']")
    if len(dirs) > len(keys):
        raise bad_request("Sort direction size exceeds sort key size")
    wanted = []
    for i, key in enumerate(keys):
        if key not in _KEYS and key not in _DROPPED:
            raise bad_request(f"Invalid input for query parameters sort_key. Value: {key}. "
                              f"'{key}' is not a valid sort key")
        if key in _ADMIN_ONLY and not ctx.is_admin:
            raise forbidden(f"Only administrators can sort servers by {key}")
        descending = (dirs[i] if i < len(dirs) else dirs[0] if dirs else "desc") == "desc"
        if key in _KEYS:
            wanted.append(SortKey(column=_KEYS[key], descending=descending))
    return wanted


def complete(wanted: list[SortKey]) -> tuple[SortKey, ...]:
    """``wanted`` followed by the tie-breakers, each column once (a later
    mention of a column could only compare equal values): a total order,
    since it ends in the uuid."""
    seen: set[str] = set()
    full = []
    for key in (*wanted, *TIE_BREAKERS):
        if key.column not in seen:
            seen.add(key.column)
            full.append(key)
        if key.column == "uuid":
            break
    return tuple(full)
