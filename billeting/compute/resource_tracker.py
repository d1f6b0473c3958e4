"""The resource tracker: reports each node of a compute to the cell
database and to Placement (docs/design/compute-reporting.md).

For every node the driver runs, a periodic run

1. saves the compute node row (totals and capabilities — hypervisor
   version, cpu_info, supported instances, stats — from the driver, usage
   from the instances the cell database places on the node) — what the
   scheduler's host records read;
2. asks the driver for the node's provider tree and applies the compute's
   rules to it: allocation ratios by precedence (explicit option, else the
   value already in Placement, else the initial ratio) for VCPU, MEMORY_MB
   and DISK_GB; the trait rules of ``traits``;
3. syncs the result into Placement through the ``TreeReporter``.

Root provider uuid = compute node uuid (the scheduler's join key), name =
the node's hypervisor hostname.
"""
from __future__ import annotations

import logging
import threading

import msgspec
from sqlalchemy import Engine

from billeting.cells import instances as inst
from billeting.cells import lifecycle_states
from billeting.cells import services
from billeting.compute import traits as trait_rules
from billeting.compute.driver import ProviderSpec, VirtDriver
from billeting.compute.reporting import CachedProvider, SyncFailed, SyncResult, TreeReporter
from billeting.compute.settings import ComputeSettings
from billeting.placement_client.client import PlacementError
from billeting.placement_client.model import Inventory

LOG = logging.getLogger(__name__)

_RATIO_CLASSES = {"VCPU": "cpu", "MEMORY_MB": "ram", "DISK_GB": "disk"}


class NodeReport(msgspec.Struct, frozen=True, kw_only=True):
    nodename: str
    uuid: str
    sync: SyncResult | None
    error: str | None = None


class ResourceTracker:
    def __init__(self, host: str, driver: VirtDriver, engine: Engine, reporter: TreeReporter,
                 settings: ComputeSettings) -> None:
        self.host = host
        self.driver = driver
        self.engine = engine
        self.reporter = reporter
        self.settings = settings
        self.disabled = False
        self._lock = threading.Lock()
        # Driver traits reported per provider, so one the driver drops is removed.
        self._reported: dict[str, frozenset[str]] = {}

    def node_uuids(self) -> dict[str, str]:
        """Node name → compute node (root provider) uuid."""
        return {name: self.driver.node_facts(name).uuid for name in self.driver.node_names()}

    def update_available_resource(self) -> list[NodeReport]:
        with self._lock:
            # (stopped and shelved instances still occupy the host)
            on_host = inst.on_host(self.engine, self.host, vm_states=lifecycle_states.ON_HOST)
            reports = []
            for nodename in self.driver.node_names():
                reports.append(self._update_node(nodename, [i for i in on_host if i.node == nodename]))
            return reports

    def set_disabled(self, disabled: bool) -> list[NodeReport]:
        """Report the service's disabled state now (``COMPUTE_STATUS_DISABLED``)."""
        with self._lock:
            if disabled == self.disabled:
                return []
            self.disabled = disabled
        return self.update_available_resource()

    def _update_node(self, nodename: str, placed: list[inst.InstanceRecord]) -> NodeReport:
        facts = self.driver.node_facts(nodename)
        services.save_node(self.engine, services.NodeUsage(
            uuid=facts.uuid, nodename=nodename, host=self.host, hypervisor_type=facts.hypervisor_type,
            vcpus=facts.vcpus, memory_mb=facts.memory_mb, local_gb=facts.local_gb,
            vcpus_used=self.settings.reserved_host_cpus + sum(i.flavor.vcpus for i in placed),
            memory_mb_used=self.settings.reserved_host_memory_mb + sum(i.flavor.memory_mb for i in placed),
            local_gb_used=self.settings.reserved_host_disk_mb // 1024
            + sum(i.flavor.root_gb + i.flavor.ephemeral_gb for i in placed),
            capabilities=services.NodeCapabilities(
                hypervisor_version=facts.hypervisor_version, cpu_info=facts.cpu_info,
                supported_instances=facts.supported_instances, stats=facts.stats)))
        tree = self.driver.provider_tree(nodename, self.settings.reserved)
        try:
            result = self.reporter.sync(facts.uuid, lambda current: self.apply_rules(tree, current))
        except (SyncFailed, PlacementError) as exc:
            LOG.error("reporting node %s to Placement failed: %s", nodename, exc)
            return NodeReport(nodename=nodename, uuid=facts.uuid, sync=None, error=str(exc))
        for spec in tree:
            self._reported[spec.uuid] = spec.traits
        if result.changed:
            LOG.info("node %s: Placement updated (created %d, deleted %d, inventories %d, traits %d)",
                     nodename, len(result.created), len(result.deleted), len(result.inventories_written),
                     len(result.traits_written))
        return NodeReport(nodename=nodename, uuid=facts.uuid, sync=result)

    def apply_rules(self, tree: list[ProviderSpec], current: dict[str, CachedProvider]) -> list[ProviderSpec]:
        """The driver's tree with ratios and traits settled against what
        Placement holds now."""
        capabilities = self.driver.capabilities()
        result = []
        for spec in tree:
            have = current.get(spec.uuid)
            inventories = {rc: self._with_ratio(rc, inv, have) for rc, inv in spec.inventories.items()}
            wanted = trait_rules.desired_traits(
                have.traits if have else (), root=spec.parent_uuid is None, owner=self.settings.owner_trait,
                capabilities=capabilities, driver_traits=spec.traits,
                previously_reported=self._reported.get(spec.uuid, frozenset()), disabled=self.disabled)
            result.append(msgspec.structs.replace(spec, inventories=inventories, traits=wanted))
        return result

    def _with_ratio(self, rc: str, inv: Inventory, have: CachedProvider | None) -> Inventory:
        kind = _RATIO_CLASSES.get(rc)
        if kind is None:
            return inv
        explicit = getattr(self.settings, f"{kind}_allocation_ratio")
        if explicit is not None:
            ratio = explicit
        elif have is not None and rc in have.inventories:
            ratio = have.inventories[rc].allocation_ratio
        else:
            ratio = getattr(self.settings, f"initial_{kind}_allocation_ratio")
        return msgspec.structs.replace(inv, allocation_ratio=float(ratio))
