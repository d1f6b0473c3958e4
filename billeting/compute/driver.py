"""The virt driver interface: what a compute asks of its hypervisor.

A driver manages one or more compute *nodes* (one for a hypervisor; many
for an Ironic-style bare-metal service). For each node it describes the
provider tree it wants in Placement — declaratively, as a list of
``ProviderSpec`` parents first — and builds and destroys guests. The
resource tracker owns everything Placement-specific around that:
allocation ratios for VCPU/MEMORY_MB/DISK_GB, the ``COMPUTE_NODE``/owner/
``COMPUTE_STATUS_DISABLED`` traits, capability traits, generations.

Build failures come in two kinds (docs/design/scheduling-flow.md#the-reschedule-walk): ``BuildFailed``
may be retried on another host; ``BuildAborted`` may not (the request
itself is bad). ``BuildInterrupted`` means the compute is stopping: the
build is left as it is, exactly as if the process had died, and is
recovered the same way.
"""
from __future__ import annotations

import threading
import uuid as uuidlib
from typing import Any, Protocol

import msgspec

from billeting.cells.messages import InstanceSpec
from billeting.placement_client.model import AllocationRequest, Inventory

# Node identity is deterministic per node name, so a restarted compute (or a
# second compute process for the same host) finds its providers again.
NODE_NAMESPACE = uuidlib.uuid5(uuidlib.NAMESPACE_URL, "https://billeting.invalid/compute-node")


def node_uuid(nodename: str) -> str:
    return str(uuidlib.uuid5(NODE_NAMESPACE, nodename))


def child_uuid(root_uuid: str, name: str) -> str:
    return str(uuidlib.uuid5(uuidlib.UUID(root_uuid), name))


class Reserved(msgspec.Struct, frozen=True, kw_only=True):
    """Host resources kept from guests ([DEFAULT]reserved_host_*)."""

    cpus: int = 0
    memory_mb: int = 512
    disk_mb: int = 0


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the compute node row says about a node (not used for capacity:
    Placement decides that)."""

    nodename: str
    uuid: str
    hypervisor_type: str
    hypervisor_version: int = 1000  # Nova's encoding: 1.0
    vcpus: int = 0
    memory_mb: int = 0
    local_gb: int = 0
    # What the scheduler's capability filters read: a JSON object (arch,
    # model, vendor, topology, features, maxphysaddr...), the (architecture,
    # hypervisor type, vm mode) triples the node runs, free-form stats.
    cpu_info: dict[str, Any] | None = None
    supported_instances: tuple[tuple[str, str, str], ...] = ()
    stats: dict[str, str] = {}


class ProviderSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One provider of a node's tree as the driver wants it. ``traits`` are
    the driver's own (it may take them away again); the tracker adds its
    rules on top and never touches traits someone else set."""

    uuid: str
    name: str
    parent_uuid: str | None = None
    inventories: dict[str, Inventory] = {}
    traits: frozenset[str] = frozenset()


class BuildFailed(Exception):
    """The build failed on this host; another host may succeed."""


class BuildAborted(Exception):
    """The build cannot succeed anywhere; do not reschedule."""


class BuildInterrupted(Exception):
    """The compute is stopping; leave the build for recovery."""


class VirtDriver(Protocol):
    name: str

    def node_names(self) -> list[str]:
        """The nodes this compute service runs, in a stable order."""

    def node_facts(self, nodename: str) -> NodeFacts: ...

    def provider_tree(self, nodename: str, reserved: Reserved) -> list[ProviderSpec]:
        """The node's providers, root first, every parent before its children."""

    def capabilities(self) -> frozenset[str]:
        """The capability traits (``COMPUTE_*``) the driver supports now."""

    def spawn(self, instance: InstanceSpec, nodename: str, allocation: AllocationRequest | None,
              stop: threading.Event) -> None:
        """Build the guest; raises BuildFailed, BuildAborted or BuildInterrupted."""

    def destroy(self, instance_uuid: str) -> bool:
        """Remove the guest; False when there was none. Never raises for a missing guest."""

    def guests(self) -> dict[str, str]:
        """Instance uuid → node name of every guest the hypervisor runs."""

    # Optional: ``health_check() -> bool``, True when the host could build
    # again. A compute that disabled itself after failed builds (build_health)
    # enables itself when it passes; without it only an operator enables it.
