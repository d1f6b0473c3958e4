"""What a caller asks the scheduler for: one typed request per call.

A request describes one or more instances that share a shape (Nova's
multi-create): the resources and traits Placement must find, the server
group and failure-domain hints, and where the instances may or must not go.
It crosses every boundary as is (Python, kombu, HTTP): msgspec encodes it
to JSON and decodes it back into the same types, so no module ever handles a
nested dict.

Trait and aggregate sets are frozensets; the Placement query renders them
sorted, so a request always produces the same query string.
"""
from __future__ import annotations

from typing import Literal

import msgspec

from billeting.placement_client.model import RequestGroup

__all__ = ["RequestGroup", "ServerGroup", "DomainConstraint", "Nearness", "Destination", "ScheduleRequest"]

Policy = Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]
HARD_POLICIES = ("affinity", "anti-affinity")
# The host itself is the narrowest failure domain; wider ones are topology levels.
HOST_SCOPE = "host"


class ServerGroup(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A server group as the scheduler needs it at decision time."""

    uuid: str
    policy: Policy
    # Anti-affinity only: how many members one failure domain may hold.
    max_server_per_host: int = 1
    # The failure domain the policy applies to: "host", or a topology level
    # such as "rack" ("anti-affinity per rack").
    scope: str = HOST_SCOPE
    # Instances already in the group (those of this request excluded).
    members: tuple[str, ...] = ()

    @property
    def hard(self) -> bool:
        return self.policy in HARD_POLICIES

    @property
    def anti(self) -> bool:
        return self.policy.endswith("anti-affinity")


class DomainConstraint(msgspec.Struct, frozen=True, kw_only=True):
    """"Same ``level`` as" or "different ``level`` from" existing instances,
    e.g. different row from instance X. Becomes ``member_of`` in the query."""

    relation: Literal["same", "different"]
    level: str
    instances: tuple[str, ...]


class Nearness(msgspec.Struct, frozen=True, kw_only=True):
    """Soft affinity by distance: as close as possible to ``instances`` (or to
    the named domain), widening one topology level at a time from ``level``
    (rack → row → room → anywhere). Each Selection says which level it met."""

    level: str
    instances: tuple[str, ...] = ()
    domain: str | None = None  # a domain name at ``level`` instead of instances


class Destination(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A requested destination: a host (all its nodes), one node, and/or a cell."""

    host: str | None = None
    node: str | None = None
    cell: str | None = None


class ScheduleRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything one ``select_destinations`` call decides on."""

    # One Placement consumer per instance, in order.
    instance_uuids: tuple[str, ...]
    project_id: str
    user_id: str
    groups: tuple[RequestGroup, ...]
    group_policy: Literal["none", "isolate"] | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    # Each entry: group suffixes whose providers must share one subtree.
    same_subtree: tuple[frozenset[str], ...] = ()
    consumer_type: str | None = None
    server_group: ServerGroup | None = None
    same_host: tuple[str, ...] = ()       # instance uuids the host must run
    different_host: tuple[str, ...] = ()  # instance uuids the host must not run
    domain_constraints: tuple[DomainConstraint, ...] = ()
    near: Nearness | None = None
    availability_zone: str | None = None
    destination: Destination | None = None
    ignore_hosts: tuple[str, ...] = ()
    # Free-form hints for site-specific filters; the built-in ones use the typed fields.
    hints: dict[str, tuple[str, ...]] = {}
    # The Nova flavor's name and extra specs, for the filters that read them
    # (AggregateInstanceExtraSpecsFilter, AggregateTypeAffinityFilter,
    # ComputeCapabilitiesFilter).
    flavor_name: str | None = None
    extra_specs: dict[str, str] = {}
    # The Nova image's properties, for the filters that read them
    # (ImagePropertiesFilter: hw_architecture, img_hv_type, hw_vm_mode,
    # img_hv_requested_version, hw_maxphysaddr_bits).
    image_properties: dict[str, str] = {}
    # The image's disk format (qcow2, raw, ...) and whether the root disk is a
    # volume instead, for request filter 3 (image type support): a host must
    # be able to boot the format, unless the hypervisor never reads the image.
    image_disk_format: str | None = None
    is_bfv: bool = False

    @property
    def num_instances(self) -> int:
        return len(self.instance_uuids)
