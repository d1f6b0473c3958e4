"""Import a fleet file into a Placement service over its API.

Safe to repeat: before writing anything, the import checks the target and
refuses when any provider or consumer of the file already exists there (or,
with ``skip_existing``, leaves those alone and imports the rest). A provider
name used by another uuid, a parent or resource class found nowhere, or an
allocation without inventory is refused in any case. Nothing is written
until every check passed.

Writing then goes: custom resource classes and traits, providers level by
level (parents first) each with its inventories, traits and aggregates,
then consumers in batches of ``POST /allocations``. Every object created is
remembered; if a write fails, they are deleted again (newest first), so a
failed import leaves the target as it found it.

A fleet exported after an inventory shrink can hold more usage than
capacity (or amounts outside min_unit/max_unit/step_size), which the API
refuses to write. Those inventories are first written just large enough
(``staged``), the allocations written, and then the exported inventory put
back, exactly as Placement allows a shrink below usage.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from billeting.placement.tools.fleet import Consumer, Fleet, Inventory, Provider, depth_levels
from billeting.placement.tools.http import PlacementHttp, ToolError, parallel, path
from billeting.placement.tools.progress import Bars

MAX_INT = 2147483647
UNTYPED_VERSION = (1, 37)  # the last microversion that writes consumers without a type
_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Plan:
    classes: list[str]  # custom classes to create
    traits: list[str]  # custom traits to create
    levels: list[list[Provider]]  # providers to create, parents first
    consumers: list[Consumer]  # consumers to write
    staged: dict[str, dict[str, Inventory]]  # provider -> class -> inventory written until allocations are in
    skipped_providers: list[str]
    skipped_consumers: list[str]


@dataclass(frozen=True, slots=True)
class ImportReport:
    providers: int
    consumers: int
    classes: int
    traits: int
    staged: int
    skipped_providers: int
    skipped_consumers: int


@dataclass
class _Journal:
    """What this import created, for undoing it."""

    classes: list[str] = field(default_factory=list)
    traits: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, *names: str) -> None:
        with self.lock:
            getattr(self, kind).extend(names)


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


# --- checking -------------------------------------------------------------------------

def plan_import(http: PlacementHttp, fleet: Fleet, bars: Bars, *, skip_existing: bool, workers: int) -> Plan:
    target_providers = {p["uuid"]: p["name"] for p in http.get("/resource_providers")["resource_providers"]}
    target_names = {name: uuid for uuid, name in target_providers.items()}
    target_classes = {rc["name"] for rc in http.get("/resource_classes")["resource_classes"]}
    target_traits = set(http.get("/traits")["traits"])
    in_file = {p.uuid for p in fleet.providers}

    existing = [p for p in fleet.providers if p.uuid in target_providers]
    clashes = [f"{p.name} (taken by {target_names[p.name]})" for p in fleet.providers
               if p.uuid not in target_providers and p.name in target_names]
    if clashes:
        raise ToolError(f"refusing to import: provider names already used by other providers in {http.url}: "
                        f"{_listing(clashes)}; nothing was written")
    orphans = [p.uuid for p in fleet.providers if p.parent_provider_uuid is not None
               and p.parent_provider_uuid not in in_file and p.parent_provider_uuid not in target_providers]
    if orphans:
        raise ToolError(f"refusing to import: the parents of providers {_listing(orphans)} are neither in the "
                        "file nor in the target; nothing was written")

    _check_names("resource class", _classes_used(fleet), set(fleet.resource_classes), target_classes)
    _check_names("trait", {t for p in fleet.providers for t in p.traits}, set(fleet.traits), target_traits)

    bars.add("checking consumers", len(fleet.consumers))
    held = list(parallel(lambda c: bool(http.get(path("allocations", c.uuid))["allocations"]), fleet.consumers,
                         workers=workers, done=lambda: bars.step("checking consumers")))
    taken = [c.uuid for c, has in zip(fleet.consumers, held) if has]
    if (existing or taken) and not skip_existing:
        found = []
        if existing:
            found.append(f"{len(existing)} provider(s) ({_listing([p.uuid for p in existing])})")
        if taken:
            found.append(f"{len(taken)} consumer(s) with allocations ({_listing(taken)})")
        raise ToolError(f"refusing to import: {' and '.join(found)} already exist in {http.url}; nothing was "
                        "written (--skip-existing imports only what is missing)")

    skipped = {p.uuid for p in existing}
    consumers = [c for c, has in zip(fleet.consumers, held) if not has]
    unknown = sorted({rp for c in consumers for rp in c.allocations} - in_file - set(target_providers))
    if unknown:
        raise ToolError(f"refusing to import: allocations name providers that are neither in the file nor in the "
                        f"target: {_listing(unknown)}; nothing was written")
    new = [p for p in fleet.providers if p.uuid not in skipped]
    return Plan(
        classes=sorted(set(fleet.resource_classes) - target_classes),
        traits=sorted(set(fleet.traits) - target_traits),
        levels=depth_levels(new),
        consumers=consumers,
        staged=_staging(new, consumers),
        skipped_providers=sorted(skipped),
        skipped_consumers=taken)


def _classes_used(fleet: Fleet) -> set[str]:
    used = {rc for p in fleet.providers for rc in p.inventories}
    return used | {rc for c in fleet.consumers for amounts in c.allocations.values() for rc in amounts}


def _check_names(kind: str, used: set[str], listed: set[str], target: set[str]) -> None:
    missing = sorted(used - listed - target)
    if missing:
        raise ToolError(f"refusing to import: {kind}(s) {_listing(missing)} are used in the file but exist "
                        "neither in the file's custom list nor in the target; nothing was written")


def _staging(providers: list[Provider], consumers: list[Consumer]) -> dict[str, dict[str, Inventory]]:
    """Inventories the allocations could not be written against as exported
    (usage above capacity, or an amount outside min_unit/max_unit/step_size),
    with a stand-in that admits them."""
    by_uuid = {p.uuid: p for p in providers}
    usage: dict[tuple[str, str], int] = {}
    amounts: dict[tuple[str, str], list[int]] = {}
    for consumer in consumers:
        for rp, resources in consumer.allocations.items():
            if rp not in by_uuid:
                continue  # an existing provider: its inventory is not ours to change
            for rc, amount in resources.items():
                usage[(rp, rc)] = usage.get((rp, rc), 0) + amount
                amounts.setdefault((rp, rc), []).append(amount)
    staged: dict[str, dict[str, Inventory]] = {}
    missing = []
    for (rp, rc), used in sorted(usage.items()):
        inventory = by_uuid[rp].inventories.get(rc)
        if inventory is None:
            missing.append(f"{rc} on {rp}")
            continue
        fits = used <= inventory.capacity() and all(
            inventory.min_unit <= a <= inventory.max_unit and a % inventory.step_size == 0
            for a in amounts[(rp, rc)])
        if not fits:
            total = max(inventory.total, inventory.reserved + used)
            if total > MAX_INT:
                raise ToolError(f"cannot import: {used} {rc} allocated on {rp} is beyond what any inventory can hold")
            staged.setdefault(rp, {})[rc] = Inventory(
                total=total, reserved=inventory.reserved, min_unit=1, max_unit=MAX_INT, step_size=1,
                allocation_ratio=max(inventory.allocation_ratio, 1.0))
    if missing:
        raise ToolError(f"refusing to import: allocations without inventory in the file: {_listing(missing)}; "
                        "nothing was written")
    return staged


# --- writing --------------------------------------------------------------------------

def _records(inventories: dict[str, Inventory]) -> dict[str, dict]:
    return {rc: {"total": i.total, "reserved": i.reserved, "min_unit": i.min_unit, "max_unit": i.max_unit,
                 "step_size": i.step_size, "allocation_ratio": i.allocation_ratio}
            for rc, i in inventories.items()}


def _create_provider(http: PlacementHttp, provider: Provider, staged: dict[str, Inventory], journal: _Journal) -> None:
    body: dict = {"uuid": provider.uuid, "name": provider.name}
    if provider.parent_provider_uuid is not None:
        body["parent_provider_uuid"] = provider.parent_provider_uuid
    generation = http.request("POST", "/resource_providers", body).body["generation"]  # type: ignore[index]
    journal.add("providers", provider.uuid)
    where = path("resource_providers", provider.uuid)
    if provider.inventories:
        records = _records({**provider.inventories, **staged})
        generation = http.request("PUT", where + "/inventories", {
            "resource_provider_generation": generation, "inventories": records}).body["resource_provider_generation"]
    if provider.traits:
        generation = http.request("PUT", where + "/traits", {
            "traits": provider.traits, "resource_provider_generation": generation}).body["resource_provider_generation"]
    if provider.aggregates:
        http.request("PUT", where + "/aggregates", {
            "aggregates": provider.aggregates, "resource_provider_generation": generation})


def _entry(consumer: Consumer) -> dict:
    entry: dict = {"allocations": {rp: {"resources": resources} for rp, resources in consumer.allocations.items()},
                   "project_id": consumer.project_id, "user_id": consumer.user_id, "consumer_generation": None}
    if consumer.consumer_type is not None:
        entry["consumer_type"] = consumer.consumer_type
    return entry


def _write_consumers(http: PlacementHttp, consumers: list[Consumer], journal: _Journal, bars: Bars,
                     batch: int) -> None:
    # Typed consumers at the negotiated version; untyped ones where writes carry no type.
    for typed in (True, False):
        group = [c for c in consumers if (c.consumer_type is not None) == typed]
        version = http.version if typed else UNTYPED_VERSION
        for start in range(0, len(group), batch):
            chunk = group[start:start + batch]
            http.request("POST", "/allocations", {c.uuid: _entry(c) for c in chunk}, version=version)
            journal.add("consumers", *(c.uuid for c in chunk))
            bars.step("consumers", len(chunk))


def _restore(http: PlacementHttp, provider: Provider) -> None:
    where = path("resource_providers", provider.uuid, "inventories")
    generation = http.get(where)["resource_provider_generation"]
    http.request("PUT", where, {"resource_provider_generation": generation,
                                "inventories": _records(provider.inventories)})


def _undo(http: PlacementHttp, journal: _Journal) -> list[str]:
    """Delete what this import created, newest first; the failures, if any."""
    failures = []
    steps = [("DELETE", path("allocations", c)) for c in reversed(journal.consumers)]
    steps += [("DELETE", path("resource_providers", p)) for p in reversed(journal.providers)]
    steps += [("DELETE", path("traits", t)) for t in reversed(journal.traits)]
    steps += [("DELETE", path("resource_classes", rc)) for rc in reversed(journal.classes)]
    for method, where in steps:
        try:
            http.request(method, where, ok=(204, 404))
        except ToolError as exc:
            failures.append(str(exc))
    return failures


def import_fleet(http: PlacementHttp, fleet: Fleet, bars: Bars, *, skip_existing: bool = False,
                 workers: int = 8, batch: int = 100) -> ImportReport:
    http.negotiate()
    plan = plan_import(http, fleet, bars, skip_existing=skip_existing, workers=workers)
    journal = _Journal()
    try:
        for name in plan.classes:
            if http.request("PUT", path("resource_classes", name)).status == 201:
                journal.add("classes", name)
        for name in plan.traits:
            if http.request("PUT", path("traits", name)).status == 201:
                journal.add("traits", name)
        bars.add("providers", sum(len(level) for level in plan.levels))
        for level in plan.levels:
            for _ in parallel(lambda p: _create_provider(http, p, plan.staged.get(p.uuid, {}), journal), level,
                              workers=workers, done=lambda: bars.step("providers")):
                pass
        bars.add("consumers", len(plan.consumers))
        _write_consumers(http, plan.consumers, journal, bars, batch)
        restore = [p for level in plan.levels for p in level if p.uuid in plan.staged]
        for _ in parallel(lambda p: _restore(http, p), restore, workers=workers):
            pass
    except (ToolError, KeyError, TypeError, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            reason = "interrupted"
        elif isinstance(exc, ToolError):
            reason = str(exc)
        else:  # a service that answered a write with an unexpected body
            reason = f"unexpected answer ({type(exc).__name__}: {exc})"
        failures = _undo(http, journal)
        if failures:
            raise ToolError(f"import failed: {reason}; undoing it failed too, the target keeps part of the file "
                            f"(first undo failure: {failures[0]})") from None
        raise ToolError(f"import failed: {reason}; everything it had written was removed again") from None
    return ImportReport(
        providers=sum(len(level) for level in plan.levels), consumers=len(plan.consumers),
        classes=len(journal.classes), traits=len(journal.traits), staged=sum(len(s) for s in plan.staged.values()),
        skipped_providers=len(plan.skipped_providers), skipped_consumers=len(plan.skipped_consumers))
