"""``sort_key``/``sort_dir`` of server listings (``openstack server list
--sort``), as Nova reads them: each may repeat, directions pair with keys in
order (the first one, or ``desc``, for keys without their own), ``host`` and
``node`` are for admins only (403), keys Nova takes but cannot sort on are
dropped silently, and anything else is a 400. Ties end in creation time and
uuid, newest first, like the listing without a sort."""
from __future__ import annotations

from collections.abc import Callable

from billeting.api.compute.context import RequestContext
from billeting.api.compute.errors import bad_request, forbidden
from billeting.api.compute.lookup import Found


def _of_record(name: str) -> Callable[[Found], object]:
    return lambda f: getattr(f.record, name) if f.record is not None else None


def _vm_state(f: Found) -> str:
    return f.record.vm_state.value if f.record is not None else "building"


def _task_state(f: Found) -> str | None:
    if f.record is None:
        return "scheduling"
    return f.record.task_state.value if f.record.task_state is not None else None


def _name(f: Found) -> str:
    return f.record.name if f.record is not None else f.build_request.name


def _created(f: Found):
    return f.record.created_at if f.record is not None else f.build_request.created_at


# What each key sorts on (a server still being scheduled has no record yet).
_KEYS: dict[str, Callable[[Found], object]] = {
    "display_name": _name,
    "hostname": _name,
    "created_at": _created,
    "updated_at": lambda f: f.record.updated_at if f.record is not None else f.build_request.created_at,
    "launched_at": _of_record("launched_at"),
    "terminated_at": _of_record("deleted_at"),
    "uuid": lambda f: f.mapping.instance_uuid,
    "project_id": lambda f: f.mapping.project_id,
    "user_id": lambda f: f.mapping.user_id,
    "vm_state": _vm_state,
    "task_state": _task_state,
    "power_state": lambda f: 1 if _vm_state(f) in ("active", "resized") else 0,
    "availability_zone": lambda f: (f.record.availability_zone if f.record is not None
                                    else f.build_request.availability_zone),
    "host": _of_record("host"),
    "node": _of_record("node"),
}
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


def order(ctx: RequestContext, params) -> list[tuple[Callable[[Found], object], bool]]:
    """The listing's sort as (value of a server, descending) pairs, most
    significant first; empty when the query asks for none."""
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
            wanted.append((_KEYS[key], descending))
    return wanted


def sort(found: list[Found], wanted: list[tuple[Callable[[Found], object], bool]]) -> list[Found]:
    """``found`` in the order ``wanted`` says, ties (and everything, when
    nothing is wanted) newest first by creation time then uuid. Servers without a value (no host yet) come first in
    ascending order, last in descending, as NULLs do in Nova's database."""
    ordered = sorted(found, key=lambda f: (_created(f), f.mapping.instance_uuid), reverse=True)
    for value, descending in reversed(wanted):  # stable sorts, least significant first
        ordered.sort(key=lambda f, value=value: ((v := value(f)) is not None, v if v is not None else 0),
                     reverse=descending)
    return ordered
