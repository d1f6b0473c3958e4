"""Export a whole fleet over the Placement API.

Reads, in this order: custom resource classes and traits, every provider,
then per provider its inventories, traits, aggregates and allocations, then
per consumer its owner and type. The service is not frozen meanwhile: for an
exact copy, stop the writers (schedulers, computes) while exporting.
"""
from __future__ import annotations

import datetime as dt

from billeting.placement.tools.fleet import FORMAT, VERSION, Consumer, Fleet, Inventory, Provider, parents_first
from billeting.placement.tools.http import PlacementHttp, parallel, path
from billeting.placement.tools.progress import Bars

_INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def _provider(http: PlacementHttp, listed: dict) -> tuple[Provider, set[str]]:
    """One provider in full, and the consumers that have allocations on it."""
    uuid = listed["uuid"]
    inventories = http.get(path("resource_providers", uuid, "inventories"))["inventories"]
    traits = http.get(path("resource_providers", uuid, "traits"))["traits"]
    aggregates = http.get(path("resource_providers", uuid, "aggregates"))["aggregates"]
    consumers = set(http.get(path("resource_providers", uuid, "allocations"))["allocations"])
    provider = Provider(
        uuid=uuid, name=listed["name"], parent_provider_uuid=listed.get("parent_provider_uuid"),
        inventories={rc: Inventory(**{f: record[f] for f in _INVENTORY_FIELDS})
                     for rc, record in sorted(inventories.items())},
        traits=sorted(traits), aggregates=sorted(aggregates))
    return provider, consumers


def _consumer(http: PlacementHttp, uuid: str) -> Consumer | None:
    found = http.get(path("allocations", uuid))
    if not found.get("allocations"):
        return None  # its allocations went away while we were reading
    kind = found.get("consumer_type")
    return Consumer(
        uuid=uuid, project_id=found["project_id"], user_id=found["user_id"],
        consumer_type=None if kind in (None, "unknown") else kind,
        allocations={rp: dict(sorted(part["resources"].items()))
                     for rp, part in sorted(found["allocations"].items())})


def export_fleet(http: PlacementHttp, bars: Bars, *, workers: int = 8) -> Fleet:
    version = http.negotiate()
    classes = sorted(rc["name"] for rc in http.get("/resource_classes")["resource_classes"]
                     if rc["name"].startswith("CUSTOM_"))
    traits = sorted(http.get("/traits?name=startswith:CUSTOM_")["traits"])
    listed = http.get("/resource_providers")["resource_providers"]

    bars.add("providers", len(listed))
    found = list(parallel(lambda p: _provider(http, p), listed, workers=workers,
                          done=lambda: bars.step("providers")))
    providers = parents_first([p for p, _ in found])
    consumer_uuids = sorted(set().union(*(c for _, c in found)) if found else set())

    bars.add("consumers", len(consumer_uuids))
    consumers = [c for c in parallel(lambda u: _consumer(http, u), consumer_uuids, workers=workers,
                                     done=lambda: bars.step("consumers")) if c is not None]
    return Fleet(format=FORMAT, version=VERSION, source=http.url, microversion=f"{version[0]}.{version[1]}",
                 exported_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                 resource_classes=classes, traits=traits, providers=providers, consumers=consumers)
