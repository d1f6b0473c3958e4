"""Finding and removing orphaned allocations: Placement consumers that
hold resources on compute providers although no instance or move should.

Each consumer holding something on the audited providers is looked up in
the cell databases given:

* an instance that is ``deleted``                      → orphan, removed
* an instance in ``error`` without a host (failed build) → orphan, removed
* a migration whose move is over (``MIGRATION_DONE``)  → orphan, removed
* any other instance or migration                      → in use, left alone
* nothing at all                                       → unknown

An unknown consumer may be a build the API level has claimed but not yet
recorded in a cell, so it is only removed when the caller says so: the
compute's periodic audit does after the consumer stayed unknown for a
grace period, ``billeting audit`` does with ``--remove-unknown``. Each
removal re-reads the cell records first, so a record that appeared in the
meantime saves its allocation.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping

import msgspec
from sqlalchemy import Engine, select

from billeting.cells import instances as inst
from billeting.cells import tables as t
from billeting.common.db.tx import run_read
from billeting.placement_client.client import PlacementClient

LOG = logging.getLogger(__name__)

# Migration statuses after which the migration consumer holds nothing.
MIGRATION_DONE = frozenset({"confirmed", "reverted", "error", "failed", "completed", "done", "cancelled"})


class Verdict(enum.StrEnum):
    IN_USE = "in-use"
    DELETED_INSTANCE = "deleted-instance"
    FAILED_BUILD = "failed-build"
    FINISHED_MIGRATION = "finished-migration"
    OFFLOADED_INSTANCE = "offloaded-instance"   # shelved and offloaded: it holds nothing
    UNKNOWN = "unknown"

    @property
    def orphan(self) -> bool:
        return self in (Verdict.DELETED_INSTANCE, Verdict.FAILED_BUILD, Verdict.FINISHED_MIGRATION,
                        Verdict.OFFLOADED_INSTANCE)


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    consumer_uuid: str
    verdict: Verdict
    cell: str | None
    # provider uuid → resource class → amount, on the audited providers
    holdings: dict[str, dict[str, int]]
    removed: bool = False


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    providers: int
    consumers: int
    # Orphans and unknown consumers only; consumers in use are counted, not listed.
    findings: tuple[Finding, ...]

    @property
    def removed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.removed)


def holdings(client: PlacementClient, provider_uuids: Iterable[str]) -> dict[str, dict[str, dict[str, int]]]:
    """consumer → provider → class → amount, over the given providers."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for rp in provider_uuids:
        for consumer, held in client.provider_allocations(rp).allocations.items():
            found.setdefault(consumer, {})[rp] = dict(held.resources)
    return found


def classify(consumers: Iterable[str], cells: Mapping[str, Engine]) -> dict[str, tuple[Verdict, str | None]]:
    """consumer → (verdict, the cell whose record decided it)."""
    pending = set(consumers)
    verdicts: dict[str, tuple[Verdict, str | None]] = {}
    for cell, engine in cells.items():
        if not pending:
            break
        for uuid, record in inst.get_many(engine, pending).items():
            verdicts[uuid] = (_instance_verdict(record), cell)
        pending -= verdicts.keys()
        for uuid, status in _migration_statuses(engine, pending).items():
            verdicts[uuid] = (Verdict.FINISHED_MIGRATION if status in MIGRATION_DONE else Verdict.IN_USE, cell)
        pending -= verdicts.keys()
    for uuid in pending:
        verdicts[uuid] = (Verdict.UNKNOWN, None)
    return verdicts


def _instance_verdict(record: inst.InstanceRecord) -> Verdict:
    if record.vm_state is inst.VmState.DELETED:
        return Verdict.DELETED_INSTANCE
    if record.vm_state is inst.VmState.ERROR and record.host is None:
        return Verdict.FAILED_BUILD
    if record.vm_state is inst.VmState.SHELVED_OFFLOADED and record.task_state is None:
        return Verdict.OFFLOADED_INSTANCE  # (while unshelving it holds the new host's claim)
    return Verdict.IN_USE


def _migration_statuses(engine: Engine, uuids: set[str]) -> dict[str, str]:
    if not uuids:
        return {}
    c = t.migrations.c
    wanted = list(uuids)
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        rows = run_read(engine, lambda conn: conn.execute(select(c.uuid, c.status).where(c.uuid.in_(chunk))).all())
        found.update((row.uuid, row.status) for row in rows)
    return found


def audit(client: PlacementClient, provider_uuids: Iterable[str], cells: Mapping[str, Engine], *,
          remove: bool = True, remove_unknown: Callable[[str], bool] | bool = False) -> AuditReport:
    """Classify every consumer on ``provider_uuids``; remove orphans when
    ``remove``, and unknown consumers for which ``remove_unknown`` says so."""
    providers = list(provider_uuids)
    held = holdings(client, providers)
    verdicts = classify(held, cells)
    findings = []
    for consumer, (verdict, cell) in sorted(verdicts.items()):
        if verdict is Verdict.IN_USE:
            continue
        wants_removal = remove and (verdict.orphan or (
            verdict is Verdict.UNKNOWN and (remove_unknown(consumer) if callable(remove_unknown)
                                            else remove_unknown)))
        removed = False
        if wants_removal and classify([consumer], cells)[consumer][0] is verdict:
            removed = client.delete_allocations(consumer)
            if removed:
                LOG.warning("audit: removed the allocations of %s (%s%s): %s", consumer, verdict.value,
                            f" in {cell}" if cell else "", held[consumer])
        findings.append(Finding(consumer_uuid=consumer, verdict=verdict, cell=cell, holdings=held[consumer],
                                removed=removed))
    return AuditReport(providers=len(providers), consumers=len(held), findings=tuple(findings))
