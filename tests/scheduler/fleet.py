"""Build small fleets in a real Placement through the typed client, for
scheduler tests. Works with the in-process and the HTTP client alike."""
from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field

from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import Inventory
from billeting.scheduler.catalog import MemoryHostCatalog
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler.selection import Selection


@dataclass
class Fleet:
    client: PlacementClient
    directory: MemoryDirectory = field(default_factory=MemoryDirectory)
    hosts: dict[str, str] = field(default_factory=dict)  # name -> uuid

    def host(self, name: str, *, vcpus: int = 16, memory_mb: int = 32768, disk_gb: int = 500,
             traits: tuple[str, ...] = (), aggregates: tuple[str, ...] = (), ratio: float = 1.0,
             extra: dict[str, int] | None = None) -> str:
        provider = self.client.create_provider(name, uuid=str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name)))
        inventories = {"VCPU": Inventory(vcpus, allocation_ratio=ratio), "MEMORY_MB": Inventory(memory_mb),
                       "DISK_GB": Inventory(disk_gb)}
        for rc, total in (extra or {}).items():
            if rc.startswith("CUSTOM_"):
                self.client.ensure_resource_class(rc)
            inventories[rc] = Inventory(total)
        generation = self.client.put_inventories(provider.uuid, provider.generation, inventories)
        if traits:
            for t in traits:
                if t.startswith("CUSTOM_"):
                    self.client.ensure_trait(t)
            generation = self._bump_traits(provider.uuid, traits, generation)
        if aggregates:
            assert self.client.put_aggregates(provider.uuid, aggregates, generation).ok
        self.hosts[name] = provider.uuid
        return provider.uuid

    def _bump_traits(self, uuid: str, traits, generation: int) -> int:
        assert self.client.put_traits(uuid, traits, generation).ok
        return self.client.get_traits(uuid).resource_provider_generation

    def child(self, parent: str, name: str, inventories: dict[str, int], traits: tuple[str, ...] = ()) -> str:
        provider = self.client.create_provider(name, parent_provider_uuid=self.hosts[parent])
        for rc in inventories:
            if rc.startswith("CUSTOM_"):
                self.client.ensure_resource_class(rc)
        generation = self.client.put_inventories(provider.uuid, provider.generation,
                                                 {rc: Inventory(n) for rc, n in inventories.items()})
        if traits:
            for t in traits:
                if t.startswith("CUSTOM_"):
                    self.client.ensure_trait(t)
            self._bump_traits(provider.uuid, traits, generation)
        return provider.uuid

    def join(self, name: str, aggregate: str) -> None:
        uuid = self.hosts[name]
        current = self.client.get_aggregates(uuid)
        assert self.client.put_aggregates(uuid, [*current.aggregates, aggregate],
                                          current.resource_provider_generation).ok

    def domain(self, level: str, name: str, hosts: list[str], parent: str | None = None) -> str:
        """A failure domain: an aggregate on the hosts, known to the directory."""
        aggregate = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{level}/{name}"))
        for h in hosts:
            self.join(h, aggregate)
        self.directory.add_domain(level, name, aggregate, parent)
        return aggregate

    def usage(self, name: str) -> dict[str, int]:
        return {rc: n for rc, n in self.client.provider_usages(self.hosts[name]).items() if n}

    def name_of(self, uuid: str) -> str:
        return {u: n for n, u in self.hosts.items()}[uuid]

    def landing_hosts(self, select: Callable[[], Selection], count: int) -> set[str]:
        """The hosts ``count`` calls of ``select`` (one claimed selection
        each) land on. Every claim is kept until the end, so the spreading
        RAM weigher moves on to each host that passes the filters: "lands
        on all of them" is then certain, not a matter of how ties break
        (among equal hosts Placement's order stands, and its limited scans
        start at a random provider)."""
        hosts, consumers = set(), []
        try:
            for _ in range(count):
                chosen = select()
                hosts.add(chosen.nodename)
                consumers.append(chosen.consumer_uuid)
        finally:
            for consumer in consumers:
                self.client.delete_allocations(consumer)
        return hosts


def memory_catalog(fleet: Fleet, *, cell_of=lambda name: "cell1", zone_of=lambda name: "nova") -> MemoryHostCatalog:
    from billeting.scheduler.catalog import HostRecord

    records = []
    for name, uuid in fleet.hosts.items():
        aggs = frozenset(fleet.client.get_aggregates(uuid).aggregates)
        records.append(HostRecord(uuid=uuid, name=name, service_host=name, cell_uuid=cell_of(name),
                                  availability_zone=zone_of(name), aggregates=aggs))
    return MemoryHostCatalog(records)


def new_uuids(n: int) -> tuple[str, ...]:
    return tuple(str(uuidlib.uuid4()) for _ in range(n))
