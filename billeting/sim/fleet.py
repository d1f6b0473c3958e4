"""Build a scenario's fleet in a real Placement, and describe it for the run.

Hosts are spread over racks, rows and rooms (``hosts_per_rack`` hosts per
rack, ``racks_per_row`` racks per row, ...) and over cells in contiguous
blocks. Every failure domain is a Placement aggregate the hosts are members
of (as the directory expects), so the real scheduler turns "anti-affinity
per rack" into its own ``member_of`` clauses. Shapes are shuffled by the
seed so a rare shape is not confined to the last racks.

The fleet is written through the ordinary typed client, so it works the
same on the in-process Placement and on one reached over HTTP.
"""
from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass, field

from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import Inventory, NewProvider
from billeting.scheduler.catalog import SHARING_TRAIT, HostRecord, MemoryHostCatalog
from billeting.scheduler.directory import CELL_LEVEL, MemoryDirectory
from billeting.sim.results import HostCapacity
from billeting.sim.scenario import HostShape, Scenario, SharingProvider

NS = uuidlib.UUID("0b5c8e0e-6a51-4b7e-9a2e-51e1e7b1c0de")
PROJECT, USER = "sim-project", "sim-user"


def sim_uuid(*parts: object) -> str:
    return str(uuidlib.uuid5(NS, "/".join(str(p) for p in parts)))


@dataclass(slots=True)
class Host:
    index: int
    uuid: str
    name: str
    shape: HostShape
    cell: str
    domains: dict[str, str]                  # level -> domain name (rack, row, room, cell)
    capacity: dict[str, int] = field(default_factory=dict)   # summed over its tree
    providers: list[str] = field(default_factory=list)      # root first, then children


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """One provider as built: effective capacity per class and its traits."""
    uuid: str
    capacity: dict[str, int]
    traits: frozenset[str] = frozenset()


@dataclass
class FleetMap:
    hosts: list[Host]
    by_uuid: dict[str, Host]
    root_of: dict[str, str]                  # provider uuid -> root uuid (sharing providers map to themselves)
    sharing: set[str]
    directory: MemoryDirectory
    records: list[HostRecord]
    prefix: str = ""
    pools: dict[str, ProviderSpec] = field(default_factory=dict)   # sharing provider uuid -> what it shares
    pools_of: dict[str, list[str]] = field(default_factory=dict)   # host uuid -> the pools it draws from

    def catalog(self) -> MemoryHostCatalog:
        return MemoryHostCatalog(self.records)

    def capacities(self) -> list[HostCapacity]:
        return [HostCapacity(host=h.name, cell=h.cell, capacity=dict(h.capacity)) for h in self.hosts]


def _effective(inv: Inventory) -> int:
    return int((inv.total - inv.reserved) * inv.allocation_ratio)


def _tree(shape: HostShape) -> tuple[dict[str, Inventory], list[tuple[str, dict[str, Inventory], list[str]]]]:
    """Root inventory and children (suffix, inventory, traits) of one host."""
    cpu = lambda n: Inventory(n, allocation_ratio=shape.cpu_allocation_ratio)  # noqa: E731
    ram = lambda n, r=0: Inventory(n, reserved=r, allocation_ratio=shape.ram_allocation_ratio)  # noqa: E731
    disk = {} if shape.shared_disk else {"DISK_GB": Inventory(shape.disk_gb)}
    if shape.kind == "ironic":
        return {f"CUSTOM_{shape.node_class}": Inventory(1)}, []
    if shape.kind == "numa":
        n = shape.numa_nodes
        children = [(f"numa{k}", {"VCPU": cpu(shape.vcpus // n),
                                  "MEMORY_MB": ram(shape.memory_mb // n, shape.reserved_memory_mb // n)},
                     ["HW_NUMA_ROOT"]) for k in range(n)]
        return dict(disk), children
    root = {"VCPU": cpu(shape.vcpus), "MEMORY_MB": ram(shape.memory_mb, shape.reserved_memory_mb), **disk}
    children = []
    if shape.kind == "gpu-nic":
        children += [(f"gpu{k}", {"VGPU": Inventory(shape.vgpus_per_gpu)}, []) for k in range(shape.gpus)]
        children += [(f"pf{k}", {"SRIOV_NET_VF": Inventory(shape.vfs_per_nic),
                                 "NET_BW_EGR_KILOBIT_PER_SEC": Inventory(shape.nic_bandwidth_kbps),
                                 "NET_BW_IGR_KILOBIT_PER_SEC": Inventory(shape.nic_bandwidth_kbps)},
                      ["HW_NIC_SRIOV", f"CUSTOM_{shape.physnet}"]) for k in range(shape.nics)]
    return root, children


def tree_of(host: Host, prefix: str = "") -> list[ProviderSpec]:
    """The providers of ``host``'s tree as ``build`` makes them, root first."""
    root_inv, children = _tree(host.shape)
    out = [ProviderSpec(host.uuid, {rc: _effective(inv) for rc, inv in root_inv.items()},
                        frozenset(host.shape.traits))]
    out += [ProviderSpec(sim_uuid(prefix, "child", host.name, suffix),
                         {rc: _effective(inv) for rc, inv in inv_.items()}, frozenset(traits))
            for suffix, inv_, traits in children]
    return out


def sharing_inventory(sp: SharingProvider) -> dict[str, Inventory]:
    """What a sharing provider shares: its disk (if any) and its other classes."""
    inv = {rc: Inventory(n) for rc, n in sp.resources.items()}
    if sp.effective_disk_gb:
        inv["DISK_GB"] = Inventory(sp.effective_disk_gb)
    return inv


def _draws_from(h: Host, sp: SharingProvider) -> bool:
    """Is ``h`` in ``sp``'s aggregate?"""
    if h.cell != f"cell{sp.cell}":
        return False
    return sp.shared_by == "cell" or h.shape.shared_disk


def layout(scenario: Scenario, prefix: str = "") -> list[Host]:
    """Which host goes where: deterministic for a scenario and seed."""
    shapes = [s for s in scenario.fleet.hosts for _ in range(s.count)]
    random.Random(f"{scenario.seed}/fleet").shuffle(shapes)
    f = scenario.fleet
    total = len(shapes)
    hosts = []
    counters: dict[str, int] = {}
    for i, shape in enumerate(shapes):
        k = counters[shape.name] = counters.get(shape.name, -1) + 1
        name = f"{prefix}{shape.name}-{k:05d}"
        rack = i // f.hosts_per_rack
        row = rack // f.racks_per_row
        room = row // f.rows_per_room
        cell = f"cell{i * f.cells // total + 1}"
        hosts.append(Host(index=i, uuid=sim_uuid(prefix, "host", name), name=name, shape=shape, cell=cell,
                          domains={"rack": f"rack{rack}", "row": f"row{row}", "room": f"room{room}",
                                   "cell": cell}))
    return hosts


def aggregate_of(level: str, name: str, prefix: str = "") -> str:
    return sim_uuid(prefix, "aggregate", level, name)


def build(client: PlacementClient, scenario: Scenario, *, prefix: str = "", progress=None) -> FleetMap:
    hosts = layout(scenario, prefix)
    directory = MemoryDirectory(("rack", "row", "room"))
    parents = {"rack": "row", "row": "room", "room": None}
    for h in hosts:
        for level in ("rack", "row", "room", CELL_LEVEL):
            name = h.domains[level]
            if directory.domain(level, name) is None:
                parent = parents.get(level)
                directory.add_domain(level, name, aggregate_of(level, name, prefix),
                                     h.domains[parent] if parent else None)
    custom_rc = {rc for h in hosts for rc in _tree(h.shape)[0] if rc.startswith("CUSTOM_")}
    custom_rc |= {rc for sp in scenario.fleet.sharing for rc in sp.resources if rc.startswith("CUSTOM_")}
    custom_traits = {t for h in hosts for t in h.shape.traits if t.startswith("CUSTOM_")}
    custom_traits |= {f"CUSTOM_{h.shape.physnet}" for h in hosts if h.shape.kind == "gpu-nic" and h.shape.nics}
    for rc in sorted(custom_rc):
        client.ensure_resource_class(rc)
    for t in sorted(custom_traits):
        client.ensure_trait(t)

    root_of: dict[str, str] = {}
    sharing: set[str] = set()
    pools: dict[str, ProviderSpec] = {}
    pool_aggs: dict[str, str] = {}           # sharing provider uuid -> its aggregate
    for sp in scenario.fleet.sharing:
        uuid = sim_uuid(prefix, "sharing", sp.name)
        inv = sharing_inventory(sp)
        agg = sim_uuid(prefix, "aggregate", "sharing", sp.name)
        client.create_providers([NewProvider(uuid=uuid, name=f"{prefix}{sp.name}", inventories=inv,
                                             traits=frozenset({SHARING_TRAIT}), aggregates=frozenset({agg}))])
        pool_aggs[uuid] = agg
        pools[uuid] = ProviderSpec(uuid, {rc: _effective(i) for rc, i in inv.items()}, frozenset({SHARING_TRAIT}))
        sharing.add(uuid)
        root_of[uuid] = uuid
    pools_of: dict[str, list[str]] = {}
    for h in hosts:
        mine = [sim_uuid(prefix, "sharing", sp.name) for sp in scenario.fleet.sharing if _draws_from(h, sp)]
        if mine:
            pools_of[h.uuid] = mine

    records = []
    batch: list[NewProvider] = []
    for n, h in enumerate(hosts):
        root_inv, children = _tree(h.shape)
        aggs = [aggregate_of(level, h.domains[level], prefix) for level in ("rack", "row", "room", CELL_LEVEL)]
        aggs += [pool_aggs[u] for u in pools_of.get(h.uuid, ())]
        batch.append(NewProvider(uuid=h.uuid, name=h.name, inventories=root_inv, traits=frozenset(h.shape.traits),
                                 aggregates=frozenset(aggs)))
        h.providers.append(h.uuid)
        root_of[h.uuid] = h.uuid
        for rc, inv in root_inv.items():
            h.capacity[rc] = h.capacity.get(rc, 0) + _effective(inv)
        for suffix, inv, traits in children:
            uuid = sim_uuid(prefix, "child", h.name, suffix)
            batch.append(NewProvider(uuid=uuid, name=f"{h.name}_{suffix}", parent_uuid=h.uuid, inventories=inv,
                                     traits=frozenset(traits or ())))
            h.providers.append(uuid)
            root_of[uuid] = h.uuid
            for rc, one in inv.items():
                h.capacity[rc] = h.capacity.get(rc, 0) + _effective(one)
        records.append(HostRecord(uuid=h.uuid, name=h.name, service_host=h.name, cell_uuid=h.cell,
                                  aggregates=frozenset(aggs)))
        if n % 100 == 99 or n == len(hosts) - 1:
            client.create_providers(batch)  # (in-process: one transaction per hundred)
            batch = []
            if progress is not None:
                progress(n + 1, len(hosts))
    return FleetMap(hosts=hosts, by_uuid={h.uuid: h for h in hosts}, root_of=root_of, sharing=sharing,
                    directory=directory, records=records, prefix=prefix, pools=pools, pools_of=pools_of)
