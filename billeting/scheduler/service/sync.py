"""Keep Placement's aggregate memberships in step with the API database.

The scheduler owns the aggregates of its topology domains and zones: their
membership in Placement should be exactly the hosts the API database gives
them. ``converge`` makes it so for a set of aggregates, reading Placement's
actual members first, so re-running an operation after a failure finishes
the job. Each host's aggregate list is changed with Placement's
read-modify-write (GET, then PUT with the provider generation; a 409 means
someone else changed the provider meanwhile, so read again and retry), and
only the aggregates being converged are added or removed: aggregates that
anyone else set on the host are kept.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.placement_client.model import WriteResult
from billeting.scheduler.errors import PlacementTrouble

LOG = logging.getLogger(__name__)

CONFLICT_TRIES = 10


@dataclass(slots=True)
class SyncReport:
    changed: list[str] = field(default_factory=list)   # providers whose aggregates were written
    missing: list[str] = field(default_factory=list)   # providers Placement no longer has
    conflicts: int = 0                                   # generation conflicts absorbed


def members(client: PlacementClient, aggregate: str) -> set[str]:
    """Root providers that Placement lists in ``aggregate``."""
    try:
        found = client.list_providers(member_of=[aggregate])
    except PlacementError as exc:
        raise PlacementTrouble(f"cannot read the members of aggregate {aggregate} from Placement: "
                              f"{exc.detail or exc}") from None
    return {p.uuid for p in found if (p.root_provider_uuid or p.uuid) == p.uuid}


def member_hosts(service, aggregate: str) -> list:
    """The scheduler's host records of the root providers Placement lists in
    ``aggregate`` (read from Placement: the host catalog only follows
    aggregates that mean something to the scheduler, so one with no metadata
    would look empty there)."""
    return list(service.catalog.records(members(service.client, aggregate)).values())


def update_provider(client: PlacementClient, provider: str, *, add: Collection[str] = (),
                    remove: Collection[str] = (), report: SyncReport | None = None) -> bool:
    """Add and remove aggregates on one provider, keeping every other one.
    False when the provider no longer exists."""
    report = report if report is not None else SyncReport()
    for attempt in range(CONFLICT_TRIES):
        try:
            current = client.get_aggregates(provider)
        except PlacementError as exc:
            if exc.status == 404:
                report.missing.append(provider)
                return False
            raise PlacementTrouble(f"cannot read the aggregates of provider {provider}: {exc.detail or exc}") from None
        have = set(current.aggregates)
        want = (have - set(remove)) | set(add)
        if want == have:
            return True
        try:
            outcome = client.put_aggregates(provider, want, current.resource_provider_generation)
        except PlacementError as exc:
            if exc.status == 404:
                report.missing.append(provider)
                return False
            raise PlacementTrouble(f"cannot update the aggregates of provider {provider}: "
                                   f"{exc.detail or exc}") from None
        if outcome.ok:
            report.changed.append(provider)
            return True
        if outcome.result is not WriteResult.PROVIDER_CONFLICT:
            raise PlacementTrouble(f"Placement refused the aggregates of provider {provider}: {outcome.detail}")
        report.conflicts += 1
        LOG.info("provider %s changed while its aggregates were updated (%s); reading it again", provider,
                 outcome.detail)
        time.sleep(random.uniform(0, 0.01 * (attempt + 1)))
    raise PlacementTrouble(f"provider {provider} kept changing: gave up updating its aggregates after "
                          f"{CONFLICT_TRIES} generation conflicts; run the operation again")


def converge(client: PlacementClient, desired: Mapping[str, Collection[str]]) -> SyncReport:
    """Make each aggregate of ``desired`` hold exactly the given root providers in Placement."""
    report = SyncReport()
    actual = {agg: members(client, agg) for agg in desired}
    add: dict[str, set[str]] = {}
    remove: dict[str, set[str]] = {}
    for agg, wanted in desired.items():
        wanted = set(wanted)
        for provider in wanted - actual[agg]:
            add.setdefault(provider, set()).add(agg)
        for provider in actual[agg] - wanted:
            remove.setdefault(provider, set()).add(agg)
    for provider in sorted(set(add) | set(remove)):
        update_provider(client, provider, add=add.get(provider, ()), remove=remove.get(provider, ()), report=report)
    if report.missing:
        LOG.warning("%d host(s) of these aggregates are no longer in Placement: %s", len(report.missing),
                    ", ".join(report.missing))
    return report
