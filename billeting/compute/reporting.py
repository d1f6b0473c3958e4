"""Keeping a node's provider tree in Placement as the compute wants it
(docs/design/compute-reporting.md#flushing-the-tree).

The reporter caches what Placement holds for each tree (providers with
parent links, generations, inventories, traits), re-reading it every
``refresh_s`` and whenever a write lost a generation race. A sync:

1. builds the wanted tree from the cached one (the caller's rules may
   depend on it: allocation ratios an operator set are kept);
2. creates missing providers, parents before children;
3. deletes providers that are no longer wanted, children before parents;
4. writes inventories, then traits, of every provider, deepest first,
   skipping what is unchanged — each write carries the cached generation.

A generation conflict drops the cache of that tree and starts over, up to
four times. Removing inventory that still has allocations is refused by
Placement (``placement.inventory.inuse``); that is not retried: the rest of
the tree is still written and the sync reports the provider as stuck.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import msgspec

from billeting.compute.driver import ProviderSpec
from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.placement_client.model import Inventory, WriteResult
from billeting.placement_client.trees import depth

LOG = logging.getLogger(__name__)

ATTEMPTS = 4
CONCURRENT_UPDATE = "placement.concurrent_update"
INVENTORY_IN_USE = "placement.inventory.inuse"
PROVIDER_IN_USE = "placement.resource_provider.inuse"


class CachedProvider(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    name: str
    parent_uuid: str | None
    generation: int
    inventories: dict[str, Inventory]
    traits: frozenset[str]


class SyncResult(msgspec.Struct, frozen=True, kw_only=True):
    root_uuid: str
    created: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    inventories_written: tuple[str, ...] = ()
    traits_written: tuple[str, ...] = ()
    # Providers whose wanted inventory could not be written because
    # allocations still use a class that would go away.
    in_use: tuple[str, ...] = ()
    attempts: int = 1

    @property
    def changed(self) -> bool:
        return bool(self.created or self.deleted or self.inventories_written or self.traits_written)


class GenerationConflict(Exception):
    pass


class SyncFailed(Exception):
    """The tree could not be brought in line (conflicts kept winning, or
    Placement refused something that retrying cannot fix)."""


class TreeReporter:
    """Thread-safe; one per compute process is enough."""

    def __init__(self, client: PlacementClient, *, refresh_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.refresh_s = refresh_s
        self.clock = clock
        self._lock = threading.RLock()
        self._trees: dict[str, dict[str, CachedProvider]] = {}
        self._loaded_at: dict[str, float] = {}
        self._ensured: set[str] = set()

    # --- the cache -------------------------------------------------------------------

    def drop(self, root_uuid: str) -> None:
        with self._lock:
            self._trees.pop(root_uuid, None)
            self._loaded_at.pop(root_uuid, None)

    def current(self, root_uuid: str) -> dict[str, CachedProvider]:
        """Placement's view of the tree (cached). Empty when it has no such tree."""
        with self._lock:
            loaded = self._loaded_at.get(root_uuid)
            if loaded is None or self.clock() - loaded > self.refresh_s:
                self._trees[root_uuid] = self._load(root_uuid)
                self._loaded_at[root_uuid] = self.clock()
            return dict(self._trees[root_uuid])

    def _load(self, root_uuid: str) -> dict[str, CachedProvider]:
        tree = {}
        for record in self.client.list_providers(in_tree=root_uuid):
            inventories = self.client.get_inventories(record.uuid)
            traits = self.client.get_traits(record.uuid)
            tree[record.uuid] = CachedProvider(
                uuid=record.uuid, name=record.name, parent_uuid=record.parent_provider_uuid,
                generation=traits.resource_provider_generation, inventories=dict(inventories.inventories),
                traits=frozenset(traits.traits))
        return tree

    def _store(self, root_uuid: str, provider: CachedProvider | None, uuid: str) -> None:
        tree = self._trees.setdefault(root_uuid, {})
        if provider is None:
            tree.pop(uuid, None)
        else:
            tree[uuid] = provider

    # --- syncing -----------------------------------------------------------------------

    def sync(self, root_uuid: str,
             wanted: Callable[[dict[str, CachedProvider]], list[ProviderSpec]]) -> SyncResult:
        """Make the tree rooted at ``root_uuid`` what ``wanted(current)`` says."""
        with self._lock:
            for attempt in range(1, ATTEMPTS + 1):
                current = self.current(root_uuid)
                specs = wanted(current)
                try:
                    result = self._flush(root_uuid, specs, current)
                    return msgspec.structs.replace(result, attempts=attempt)
                except GenerationConflict as exc:
                    LOG.info("provider tree %s changed under us (%s); re-reading it", root_uuid, exc)
                    self.drop(root_uuid)
            raise SyncFailed(f"provider tree {root_uuid}: generation conflicts on {ATTEMPTS} attempts")

    def _flush(self, root_uuid: str, specs: list[ProviderSpec],
               current: dict[str, CachedProvider]) -> SyncResult:
        wanted = {s.uuid: s for s in specs}
        if root_uuid not in wanted or wanted[root_uuid].parent_uuid is not None:
            raise ValueError(f"the wanted tree must hold root {root_uuid} without a parent")
        created, deleted, inv_written, traits_written, in_use = [], [], [], [], []
        parent_of = {s.uuid: s.parent_uuid for s in specs}
        # 1. new providers, parents first
        for spec in sorted(specs, key=lambda s: depth(s.uuid, parent_of)):
            if spec.uuid in current:
                continue
            try:
                record = self.client.create_provider(spec.name, uuid=spec.uuid,
                                                     parent_provider_uuid=spec.parent_uuid)
            except PlacementError as exc:
                if exc.status == 409:
                    raise SyncFailed(f"cannot create provider {spec.name} ({spec.uuid}): {exc.detail}") from None
                raise
            current[spec.uuid] = CachedProvider(uuid=spec.uuid, name=spec.name, parent_uuid=spec.parent_uuid,
                                                generation=record.generation, inventories={}, traits=frozenset())
            self._store(root_uuid, current[spec.uuid], spec.uuid)
            created.append(spec.uuid)
        # 2. vanished providers, children first
        current_parents = {u: p.parent_uuid for u, p in current.items()}
        for uuid in sorted((u for u in current if u not in wanted), key=lambda u: -depth(u, current_parents)):
            try:
                self.client.delete_provider(uuid)
            except PlacementError as exc:
                if exc.status == 409 and exc.code in (PROVIDER_IN_USE, CONCURRENT_UPDATE):
                    LOG.warning("provider %s is no longer reported but still in use: %s", uuid, exc.detail)
                    in_use.append(uuid)
                    continue
                raise
            current.pop(uuid)
            self._store(root_uuid, None, uuid)
            deleted.append(uuid)
        # 3. inventories then traits, deepest first
        for spec in sorted(specs, key=lambda s: -depth(s.uuid, parent_of)):
            have = current[spec.uuid]
            if have.inventories != spec.inventories:
                for rc in spec.inventories:
                    self._ensure_class(rc)
                try:
                    generation = self.client.put_inventories(spec.uuid, have.generation, spec.inventories)
                except PlacementError as exc:
                    if exc.status == 409 and exc.code == INVENTORY_IN_USE:
                        LOG.error("cannot update inventory of provider %s: %s", spec.name, exc.detail)
                        in_use.append(spec.uuid)
                        generation = None
                    elif exc.status == 409:
                        raise GenerationConflict(exc.detail) from None
                    else:
                        raise
                if generation is not None:
                    have = msgspec.structs.replace(have, generation=generation,
                                                   inventories=dict(spec.inventories))
                    current[spec.uuid] = have
                    self._store(root_uuid, have, spec.uuid)
                    inv_written.append(spec.uuid)
            if have.traits != spec.traits:
                for trait in spec.traits:
                    self._ensure_trait(trait)
                outcome = self.client.put_traits(spec.uuid, spec.traits, have.generation)
                if outcome.result is WriteResult.PROVIDER_CONFLICT:
                    raise GenerationConflict(outcome.detail)
                if not outcome.ok:
                    raise SyncFailed(f"Placement refused the traits of {spec.name}: {outcome.detail}")
                generation = self.client.get_traits(spec.uuid).resource_provider_generation
                have = msgspec.structs.replace(have, generation=generation, traits=spec.traits)
                current[spec.uuid] = have
                self._store(root_uuid, have, spec.uuid)
                traits_written.append(spec.uuid)
        return SyncResult(root_uuid=root_uuid, created=tuple(created), deleted=tuple(deleted),
                          inventories_written=tuple(inv_written), traits_written=tuple(traits_written),
                          in_use=tuple(in_use))

    def _ensure_class(self, name: str) -> None:
        if name.startswith("CUSTOM_") and name not in self._ensured:
            self.client.ensure_resource_class(name)
            self._ensured.add(name)

    def _ensure_trait(self, name: str) -> None:
        if name.startswith("CUSTOM_") and ("trait:" + name) not in self._ensured:
            self.client.ensure_trait(name)
            self._ensured.add("trait:" + name)
