"""Nova's way of asking — a flavor with extra specs, an image with
properties — translated into a ``ScheduleRequest`` (docs/design/request-translation.md#translation).

The translation, in order:

1. extra specs: ``group_policy``; ``resources{S}:{RC}=N`` (N >= 0; 0 removes
   the class, which is how bare-metal flavors drop the defaults) and
   ``trait{S}:{T}=required|forbidden``; anything else (``hw:*``,
   ``capabilities:*``, ...) is not a Placement term and is left to filters;
2. image properties ``trait:{T}=required`` → required on the unsuffixed group;
3. CPU pinning and guest features (``nova_features``): ``hw:cpu_policy``
   ``dedicated`` asks for PCPU instead of VCPU, ``mixed`` for both;
   ``hw:cpu_thread_policy`` requires or forbids ``HW_CPU_HYPERTHREADING``;
   memory encryption, persistent memory, vTPM, secure boot and the like ask
   for the host trait or resource that provides them;
4. the flavor's own amounts go to the unsuffixed group unless a group
   already names that class: VCPU (unless VCPU or PCPU is named),
   MEMORY_MB, and DISK_GB = ephemeral + ceil(swap MB / 1024) + root, the
   root left out when booting from volume;
5. zero amounts are removed, then groups left empty;
6. with two or more numbered groups and no ``group_policy``, Placement
   would refuse the query: the caller gets that refusal (as Nova does).

The flavor's name and extra specs and the image's properties also travel
in the request whole, for the filters that read them (capabilities, image
properties, aggregate metadata).

A flavor or image asking for what Nova decides on the host and this
scheduler does not model (a guest NUMA topology, huge pages, a PCI
passthrough alias: ``nova_features.unmodelled``) is refused with
``Unmodelled`` rather than placed as if it had not asked.

Invalid entries (an unknown standard class, a negative amount, a trait
value other than required/forbidden) are skipped with a warning, as Nova
does; the compute API validates flavors when they are created.
"""
from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import msgspec
import os_resource_classes

from billeting.common.uuids import is_uuid_like, normalize_uuid
from billeting.placement_client.model import RequestGroup
from billeting.scheduler import nova_features
from billeting.scheduler.directory import CELL_LEVEL, Directory
from billeting.scheduler.request import (
    Destination,
    DomainConstraint,
    Nearness,
    ScheduleRequest,
    ServerGroup,
)

LOG = logging.getLogger(__name__)

_SPEC_KEY = re.compile(r"^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.+)$")
_STANDARD_CLASSES = frozenset(os_resource_classes.STANDARDS)
BASE_CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
INSTANCE_CONSUMER = "INSTANCE"


class Flavor(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vcpus: int
    memory_mb: int
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap: int = 0  # MB
    name: str = ""
    extra_specs: dict[str, str] = {}


class Image(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str = ""
    # Glance's disk format (qcow2, raw, iso, ...): a host must be able to
    # boot it (request filter 3). None: the catalog gave none.
    disk_format: str | None = None
    properties: dict[str, str] = {}


class _Group:
    """A request group while it is being assembled."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix
        self.resources: dict[str, int] = {}
        self.required: set[str] = set()
        self.forbidden: set[str] = set()

    def frozen(self) -> RequestGroup:
        return RequestGroup(suffix=self.suffix, resources=dict(sorted(self.resources.items())),
                            required=tuple(frozenset({t}) for t in sorted(self.required)),
                            forbidden=frozenset(self.forbidden))


def _valid_class(name: str) -> bool:
    return name in _STANDARD_CLASSES or (name.startswith("CUSTOM_") and len(name) > 7)


def _from_extra_specs(extra_specs: dict[str, str], groups: dict[str, _Group]) -> str | None:
    policy = None
    for key, value in sorted(extra_specs.items()):
        if key == "group_policy":
            if value in ("none", "isolate"):
                policy = value
            else:
                LOG.warning("ignoring group_policy=%r: expected none or isolate", value)
            continue
        match = _SPEC_KEY.match(key)
        if not match:
            continue
        kind, suffix, name = match.group(1), match.group(2) or "", match.group(3)
        if kind == "resources":
            try:
                amount = int(value)
            except ValueError:
                amount = -1
            if amount < 0 or not _valid_class(name):
                LOG.warning("ignoring extra spec %s=%r: not a resource class and amount", key, value)
                continue
            groups.setdefault(suffix, _Group(suffix)).resources[name] = amount
        else:
            if value not in ("required", "forbidden"):
                LOG.warning("ignoring extra spec %s=%r: expected required or forbidden", key, value)
                continue
            group = groups.setdefault(suffix, _Group(suffix))
            (group.required if value == "required" else group.forbidden).add(name)
    return policy


def _image_or_flavor(flavor: Flavor, image: Image | None) -> nova_features.Prop:
    def prop(spec: str | None, image_prop: str) -> str | None:
        return (spec and flavor.extra_specs.get(spec)) or (image.properties.get(image_prop) if image else None)
    return prop


def resource_groups(flavor: Flavor, image: Image | None = None, *,
                    is_bfv: bool = False) -> tuple[tuple[RequestGroup, ...], str | None]:
    """The request groups and group policy of a flavor/image pair."""
    groups: dict[str, _Group] = {}
    policy = _from_extra_specs(flavor.extra_specs, groups)
    if image is not None:
        for key, value in image.properties.items():
            if key.startswith("trait:") and value == "required" and len(key) > 6:
                groups.setdefault("", _Group("")).required.add(key[6:])
    base = groups.setdefault("", _Group(""))
    prop = _image_or_flavor(flavor, image)
    nova_features.pinning(prop, flavor.vcpus, base.resources, base.required, base.forbidden,
                          cpus_named=any("PCPU" in g.resources or "VCPU" in g.resources for g in groups.values()))
    nova_features.features(prop, base.resources, base.required)

    named = {rc for g in groups.values() for rc in g.resources}
    if "VCPU" not in named and "PCPU" not in named:
        base.resources["VCPU"] = flavor.vcpus
    if "MEMORY_MB" not in named:
        base.resources["MEMORY_MB"] = flavor.memory_mb
    if "DISK_GB" not in named:
        disk = flavor.ephemeral_gb + math.ceil(flavor.swap / 1024) + (0 if is_bfv else flavor.root_gb)
        if disk > 0:
            base.resources["DISK_GB"] = disk

    for group in groups.values():
        group.resources = {rc: n for rc, n in group.resources.items() if n > 0}
    kept = [g for g in groups.values() if g.resources or g.required or g.forbidden]
    numbered = [g for g in kept if g.suffix]
    if len(numbered) >= 2 and policy is None:
        LOG.info("flavor %s has %d numbered request groups and no group_policy", flavor.name, len(numbered))
    return tuple(g.frozen() for g in sorted(kept, key=lambda g: g.suffix)), policy


class Unmodelled(ValueError):
    """The flavor or image asks for a guest feature the scheduler does not
    model (``nova_features.unmodelled``); the caller's 400."""

    def __init__(self, flavor: Flavor, image: Image | None) -> None:
        keys = unmodelled_keys(flavor, image)
        super().__init__(f"flavor {flavor.name or '(unnamed)'} asks for {', '.join(keys)}: "
                         f"{nova_features.UNMODELLED_WHY}")
        self.keys = keys


def unmodelled_keys(flavor: Flavor, image: Image | None = None) -> list[str]:
    return nova_features.unmodelled(flavor.extra_specs, image.properties if image is not None else {})


def request_from_nova(flavor: Flavor, image: Image | None = None, *, instance_uuids: Iterable[str],
                      project_id: str, user_id: str, is_bfv: bool = False,
                      availability_zone: str | None = None, server_group: ServerGroup | None = None,
                      same_host: Iterable[str] = (), different_host: Iterable[str] = (),
                      destination: Destination | None = None, ignore_hosts: Iterable[str] = (),
                      domain_constraints: Iterable[DomainConstraint] = (), near: Nearness | None = None,
                      consumer_type: str | None = INSTANCE_CONSUMER) -> ScheduleRequest:
    """Raises ``Unmodelled`` for a flavor or image the scheduler cannot place truthfully."""
    if unmodelled_keys(flavor, image):
        raise Unmodelled(flavor, image)
    groups, policy = resource_groups(flavor, image, is_bfv=is_bfv)
    root_required = frozenset(nova_features.root_traits(_image_or_flavor(flavor, image), flavor.extra_specs))
    return ScheduleRequest(instance_uuids=tuple(instance_uuids), project_id=project_id, user_id=user_id,
                           groups=groups, group_policy=policy, consumer_type=consumer_type,
                           root_required=root_required,
                           server_group=server_group, same_host=tuple(same_host),
                           different_host=tuple(different_host), availability_zone=availability_zone,
                           destination=destination, ignore_hosts=tuple(ignore_hosts),
                           domain_constraints=tuple(domain_constraints), near=near,
                           flavor_name=flavor.name or None, extra_specs=dict(flavor.extra_specs),
                           image_properties=dict(image.properties) if image is not None else {},
                           image_disk_format=image.disk_format if image is not None else None, is_bfv=is_bfv)


# --- failure-domain hints ----------------------------------------------------------
# Nova passes hints it does not know to the scheduler's filters; these are
# Billeting's, named like same_host/different_host: "same_rack": [server uuids],
# "different_row": [...], and "near_rack": a rack's name or server uuids.
_DOMAIN_HINT = re.compile(r"^(same|different|near)_(.+)$")


class BadHint(ValueError):
    """A failure-domain hint that cannot be used (the caller's 400)."""


def domain_hints(hints: Mapping[str, Sequence[str]], directory: Directory, *,
                 exclude: str | None = None) -> tuple[tuple[DomainConstraint, ...], Nearness | None]:
    """The failure-domain constraints and nearness that ``hints`` (each value
    a list, as a request spec keeps them) ask for, at the directory's
    topology levels. Keys naming no level (``same_host`` among them) are
    left to others; ``exclude``: an instance a move leaves out (the one moving)."""
    levels = (*directory.levels, CELL_LEVEL)
    constraints: list[DomainConstraint] = []
    near: Nearness | None = None
    for key in sorted(hints):
        found = _DOMAIN_HINT.match(key)
        if found is None or found.group(2) not in levels:
            continue
        relation, level = found.groups()
        if relation == "near" and level == CELL_LEVEL:
            continue  # (nearness widens through the topology levels; a cell is not one of them)
        values = [hints[key]] if isinstance(hints[key], str) else list(hints[key])
        if relation == "near":
            if near is not None:
                raise BadHint(f"{key}: only one near_<level> hint may be given")
            if len(values) == 1 and isinstance(values[0], str) and not is_uuid_like(values[0]):
                if directory.domain(level, values[0]) is None:
                    raise BadHint(f"{key}: no {level} named {values[0]!r}")
                near = Nearness(level=level, domain=values[0])
                continue
        if not values or not all(isinstance(v, str) and is_uuid_like(v) for v in values):
            raise BadHint(f"{key} takes server uuids" + (f" or one {level}'s name" if relation == "near" else ""))
        instances = tuple(u for u in dict.fromkeys(normalize_uuid(v) for v in values) if u != exclude)
        if not instances:
            continue
        if relation == "near":
            near = Nearness(level=level, instances=instances)
        else:
            constraints.append(DomainConstraint(relation=relation, level=level, instances=instances))
    return tuple(constraints), near
