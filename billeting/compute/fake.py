"""A fake virt driver: no hypervisor, a configurable shape, and builds that
take a set time and fail with a set probability (docs/design/compute-reporting.md#the-fake-driver).

Shapes (one node named after the service host, except Ironic):

* ``flat``   — VCPU, MEMORY_MB, DISK_GB (and PCPU when asked) on the root;
* ``numa``   — DISK_GB on the root; one child per NUMA cell with its share
  of VCPU/PCPU/MEMORY_MB and ``HW_NUMA_ROOT``;
* ``pci``    — a flat root plus one child per SR-IOV physical function with
  ``SRIOV_NET_VF`` and egress/ingress bandwidth, traits ``HW_NIC_SRIOV``
  and ``CUSTOM_PHYSNET_<NAME>``;
* ``vgpu``   — a flat root plus one child per physical GPU with ``VGPU``;
* ``ironic`` — N bare-metal nodes, each its own root provider (uuid and
  name = the node uuid) with exactly one ``CUSTOM_<CLASS>`` unit, reserved
  while the node is in maintenance, and the node's traits.

Each node also tells what its hypervisor is and can run (``node_facts``):
by default a ``fake`` hypervisor, version 1.0, on x86_64 with the features
of its CPU traits, running x86_64 hvm guests, booting AKI/AMI/ARI, ISO,
QCOW2 and RAW images (``FakeConfig`` changes it).

Guests live in memory, so a restarted fake compute has none — like a host
that rebooted — which is what crash-recovery tests need.
"""
from __future__ import annotations

import random
import re
import threading
import uuid as uuidlib
from typing import Literal

import msgspec

from billeting.cells.messages import InstanceSpec
from billeting.compute.driver import (
    BuildAborted,
    BuildFailed,
    BuildInterrupted,
    NodeFacts,
    ProviderSpec,
    Reserved,
    child_uuid,
    node_uuid,
)
from billeting.compute.traits import image_type_traits
from billeting.placement_client.model import AllocationRequest, Inventory

Shape = Literal["flat", "numa", "pci", "vgpu", "ironic"]
SHAPES: tuple[str, ...] = ("flat", "numa", "pci", "vgpu", "ironic")

DEFAULT_CAPABILITIES = frozenset({
    "COMPUTE_NET_ATTACH_INTERFACE", "COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG", "COMPUTE_DEVICE_TAGGING",
    "COMPUTE_VOLUME_ATTACH_WITH_TAG", "COMPUTE_VOLUME_EXTEND", "COMPUTE_VOLUME_MULTI_ATTACH",
    "COMPUTE_TRUSTED_CERTS", "COMPUTE_SAME_HOST_COLD_MIGRATE", "COMPUTE_RESCUE_BFV",
})
# The disk formats the node boots, reported as COMPUTE_IMAGE_TYPE_* capability
# traits: what Nova's libvirt driver reports for KVM with its default image
# backend (not VHD, VHDX, VMDK, VDI or PLOOP), so the usual qcow2 and raw
# images find hosts when the scheduler asks for image type support.
DEFAULT_IMAGE_TYPES = ("AKI", "AMI", "ARI", "ISO", "QCOW2", "RAW")
DEFAULT_CPU_TRAITS = frozenset({"HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42"})
# cpu_info features: the flags behind DEFAULT_CPU_TRAITS, as a hypervisor names them.
DEFAULT_CPU_FEATURES = ("avx2", "sse4.2")


class FakeConfig(msgspec.Struct, frozen=True, kw_only=True):
    shape: Shape = "flat"
    # Host size (Nova's fake default is very large so capacity never runs out).
    vcpus: int = 1000
    pcpus: int = 0
    memory_mb: int = 800_000
    disk_gb: int = 600_000
    numa_nodes: int = 2
    pfs: int = 2
    vfs_per_pf: int = 8
    bandwidth_kbps: int = 10_000_000
    physnet: str = "physnet1"
    gpus: int = 2
    vgpus_per_gpu: int = 4
    ironic_nodes: int = 4
    ironic_class: str = "baremetal.gold"
    ironic_maintenance: tuple[int, ...] = ()   # node indexes in maintenance
    ironic_traits: frozenset[str] = frozenset()
    capabilities: frozenset[str] = DEFAULT_CAPABILITIES
    image_types: tuple[str, ...] = DEFAULT_IMAGE_TYPES  # disk formats, e.g. ("QCOW2", "RAW")
    cpu_traits: frozenset[str] = DEFAULT_CPU_TRAITS
    # What the node says its hypervisor is and can run (the compute node row;
    # the scheduler's capability filters read it). cpu_info is made from the
    # architecture, model, features and address bits; supported_instances left
    # empty is one triple: (architecture, hypervisor type, "hvm").
    hypervisor_type: str = "fake"
    hypervisor_version: int = 1000  # Nova's encoding: 1.0
    architecture: str = "x86_64"
    cpu_model: str = "Fake-Server"
    cpu_features: tuple[str, ...] = DEFAULT_CPU_FEATURES
    maxphysaddr_bits: int = 46
    supported_instances: tuple[tuple[str, str, str], ...] = ()
    stats: dict[str, str] = {}
    # Builds: how long spawn takes, how often it fails (0..1; 1 = always),
    # and whether failures are aborts (never rescheduled) instead.
    build_time_s: float = 0.0
    failure_rate: float = 0.0
    abort_builds: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown fake shape {self.shape!r} (use {', '.join(SHAPES)})")
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError("failure_rate must be between 0 and 1")
        if self.build_time_s < 0:
            raise ValueError("build_time_s must not be negative")
        if not 0 < len(self.hypervisor_type) <= 64:
            raise ValueError("hypervisor_type has 1 to 64 characters")
        image_type_traits(self.image_types)  # (raises for a format no trait names)
        if self.hypervisor_version < 0 or self.maxphysaddr_bits < 1:
            raise ValueError("hypervisor_version must not be negative, maxphysaddr_bits must be at least 1")
        for name in ("vcpus", "memory_mb", "disk_gb", "numa_nodes", "pfs", "vfs_per_pf", "gpus",
                     "vgpus_per_gpu", "ironic_nodes"):
            at_least_one = name in ("numa_nodes", "ironic_nodes")
            if getattr(self, name) < (1 if at_least_one else 0):
                raise ValueError(f"{name} must not be {'below 1' if at_least_one else 'negative'}")


def resource_class_for(node_class: str) -> str:
    """Ironic's rule: non-alphanumerics → ``_``, upper case, ``CUSTOM_`` prefix."""
    return "CUSTOM_" + re.sub(r"[^A-Za-z0-9]", "_", node_class).upper()


def _inv(total: int, reserved: int = 0, ratio: float = 1.0) -> Inventory:
    return Inventory(total=total, reserved=min(reserved, total), min_unit=1, max_unit=total, step_size=1,
                     allocation_ratio=ratio)


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class FakeDriver:
    name = "fake"

    def __init__(self, host: str, config: FakeConfig | None = None) -> None:
        self.host = host
        self.config = config or FakeConfig()
        self._rng = random.Random(self.config.seed)
        self._lock = threading.Lock()
        self._guests: dict[str, str] = {}
        self._capabilities = self.config.capabilities
        if self.config.shape == "ironic":
            self._ironic = {str(uuidlib.uuid5(uuidlib.UUID(node_uuid(host)), f"ironic-{i}")): i
                            for i in range(self.config.ironic_nodes)}
        else:
            self._ironic = {}

    # --- nodes and their providers -------------------------------------------------

    def node_names(self) -> list[str]:
        return list(self._ironic) if self._ironic else [self.host]

    def _root_uuid(self, nodename: str) -> str:
        # An Ironic node's provider uuid is the node's own uuid.
        return nodename if nodename in self._ironic else node_uuid(nodename)

    def node_facts(self, nodename: str) -> NodeFacts:
        c = self.config
        if nodename in self._ironic:
            # A bare-metal node runs one whole-machine guest of its architecture.
            return NodeFacts(nodename=nodename, uuid=nodename, hypervisor_type="ironic",
                             supported_instances=((c.architecture, "baremetal", "hvm"),), stats=dict(c.stats))
        vcpus = c.vcpus + c.pcpus
        cpu_info = {"arch": c.architecture, "model": c.cpu_model, "vendor": "Billeting",
                    "topology": {"sockets": 1, "cores": vcpus, "threads": 1},
                    "features": list(c.cpu_features),
                    "maxphysaddr": {"mode": "passthrough", "bits": c.maxphysaddr_bits}}
        supported = c.supported_instances or ((c.architecture, c.hypervisor_type.lower(), "hvm"),)
        return NodeFacts(nodename=nodename, uuid=self._root_uuid(nodename), hypervisor_type=c.hypervisor_type,
                         hypervisor_version=c.hypervisor_version, vcpus=vcpus, memory_mb=c.memory_mb,
                         local_gb=c.disk_gb, cpu_info=cpu_info, supported_instances=supported, stats=dict(c.stats))

    def set_capabilities(self, capabilities: frozenset[str]) -> None:
        """Change what the hypervisor supports (e.g. after an upgrade)."""
        self._capabilities = frozenset(capabilities)

    def capabilities(self) -> frozenset[str]:
        # Image types follow the configuration (they may change with it), the
        # rest follow set_capabilities.
        return self._capabilities | image_type_traits(self.config.image_types)

    def provider_tree(self, nodename: str, reserved: Reserved) -> list[ProviderSpec]:
        c = self.config
        root = self._root_uuid(nodename)
        if nodename in self._ironic:
            index = self._ironic[nodename]
            rc = resource_class_for(c.ironic_class)
            held = 1 if index in c.ironic_maintenance else 0
            return [ProviderSpec(uuid=root, name=nodename, inventories={rc: _inv(1, held)},
                                 traits=c.ironic_traits)]
        disk_reserved = -(-reserved.disk_mb // 1024)
        if c.shape == "numa":
            tree = [ProviderSpec(uuid=root, name=nodename, traits=c.cpu_traits,
                                 inventories={"DISK_GB": _inv(c.disk_gb, disk_reserved)} if c.disk_gb else {})]
            for cell, (vcpus, pcpus, memory) in enumerate(zip(_split(c.vcpus, c.numa_nodes),
                                                              _split(c.pcpus, c.numa_nodes),
                                                              _split(c.memory_mb, c.numa_nodes))):
                # Host reservations come out of the first NUMA cell.
                inventories = {"VCPU": _inv(vcpus, reserved.cpus if cell == 0 else 0),
                               "MEMORY_MB": _inv(memory, reserved.memory_mb if cell == 0 else 0)}
                if pcpus:
                    inventories["PCPU"] = _inv(pcpus)
                name = f"{nodename}_numa{cell}"
                tree.append(ProviderSpec(uuid=child_uuid(root, name), name=name, parent_uuid=root,
                                         inventories={k: v for k, v in inventories.items() if v.total},
                                         traits=frozenset({"HW_NUMA_ROOT"})))
            return tree
        inventories = {"VCPU": _inv(c.vcpus, reserved.cpus), "MEMORY_MB": _inv(c.memory_mb, reserved.memory_mb),
                       "DISK_GB": _inv(c.disk_gb, disk_reserved)}
        if c.pcpus:
            inventories["PCPU"] = _inv(c.pcpus)
        tree = [ProviderSpec(uuid=root, name=nodename, traits=c.cpu_traits,
                             inventories={k: v for k, v in inventories.items() if v.total})]
        if c.shape == "pci":
            physnet = "CUSTOM_PHYSNET_" + re.sub(r"[^A-Za-z0-9]", "_", c.physnet).upper()
            for pf in range(c.pfs):
                name = f"{nodename}_pci_0000_81_00_{pf}"
                inv = {"SRIOV_NET_VF": _inv(c.vfs_per_pf), "NET_BW_EGR_KILOBIT_PER_SEC": _inv(c.bandwidth_kbps),
                       "NET_BW_IGR_KILOBIT_PER_SEC": _inv(c.bandwidth_kbps)}
                tree.append(ProviderSpec(uuid=child_uuid(root, name), name=name, parent_uuid=root,
                                         inventories={k: v for k, v in inv.items() if v.total},
                                         traits=frozenset({"HW_NIC_SRIOV", physnet})))
        elif c.shape == "vgpu":
            for gpu in range(c.gpus):
                name = f"{nodename}_pci_0000_0a_00_{gpu}"
                tree.append(ProviderSpec(uuid=child_uuid(root, name), name=name, parent_uuid=root,
                                         inventories={"VGPU": _inv(c.vgpus_per_gpu)} if c.vgpus_per_gpu else {}))
        return tree

    # --- guests ------------------------------------------------------------------

    def spawn(self, instance: InstanceSpec, nodename: str, allocation: AllocationRequest | None,
              stop: threading.Event) -> None:
        c = self.config
        if c.build_time_s and stop.wait(c.build_time_s):
            raise BuildInterrupted(f"compute {self.host} stopped while building {instance.uuid}")
        if stop.is_set():
            raise BuildInterrupted(f"compute {self.host} stopped while building {instance.uuid}")
        with self._lock:
            failed = c.failure_rate > 0 and self._rng.random() < c.failure_rate
        if failed:
            cls = BuildAborted if c.abort_builds else BuildFailed
            raise cls(f"fake driver on {self.host}: spawn of {instance.uuid} failed "
                      f"(failure rate {c.failure_rate:g})")
        with self._lock:
            self._guests[instance.uuid] = nodename

    def set_failure_rate(self, failure_rate: float) -> None:
        """Break or repair the host while it runs."""
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError("failure_rate must be between 0 and 1")
        self.config = msgspec.structs.replace(self.config, failure_rate=failure_rate)

    def health_check(self) -> bool:
        """A trial build: it fails as often as real builds do."""
        c = self.config
        with self._lock:
            return not (c.failure_rate > 0 and self._rng.random() < c.failure_rate)

    def destroy(self, instance_uuid: str) -> bool:
        with self._lock:
            return self._guests.pop(instance_uuid, None) is not None

    def guests(self) -> dict[str, str]:
        with self._lock:
            return dict(self._guests)
