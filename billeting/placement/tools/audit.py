"""Audit a Placement fleet for records that should not exist.

Checks:

* ``consumer_without_allocations``: a consumer record with no allocation
  (Placement deletes a consumer with its last allocation; such records come
  from crashes, manual repairs, or an upstream database's quirk docs/design/placement-quirks.md#q1).
* ``allocation_on_missing_provider``: an allocation whose provider row is
  gone (only possible when foreign keys were bypassed: restores, repairs).
* ``allocation_without_inventory``: usage of a class the provider has no
  inventory of (same origins).
* ``usage_over_capacity``: usage above ``(total - reserved) * allocation_ratio``,
  which Placement allows when an inventory is shrunk below its usage.
* ``kept_usage_out_of_step``: an inventory's kept usage (what candidates
  read) differs from the sum of its allocations (allocation rows written
  around Placement); ``--recount-usage`` sets it from the allocations.
* ``stock_out_of_step``: a provider's stock (its inventories and usage in
  one row, which sampled candidate searches read) differs from its
  inventory rows (inventory rows written around Placement, or a server
  older than migration 0006 writing during an upgrade); ``--recount-usage``
  recomputes it.

With ``--db`` (Billeting's own database) every check runs. Through the API
(``--url``, any Placement) only ``usage_over_capacity`` can be seen: the API
never lists consumers, and it only ever shows allocations joined to the
providers and inventories that exist; the report says which checks did not run.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, and_, func, select

from billeting.placement import allocations, stock
from billeting.placement.store import tables as t
from billeting.placement.tools.http import PlacementHttp, parallel, path
from billeting.placement.tools.progress import Bars

CONSUMER_WITHOUT_ALLOCATIONS = "consumer_without_allocations"
ALLOCATION_ON_MISSING_PROVIDER = "allocation_on_missing_provider"
ALLOCATION_WITHOUT_INVENTORY = "allocation_without_inventory"
USAGE_OVER_CAPACITY = "usage_over_capacity"
KEPT_USAGE_OUT_OF_STEP = "kept_usage_out_of_step"
STOCK_OUT_OF_STEP = "stock_out_of_step"
CHECKS = (CONSUMER_WITHOUT_ALLOCATIONS, ALLOCATION_ON_MISSING_PROVIDER, ALLOCATION_WITHOUT_INVENTORY,
          USAGE_OVER_CAPACITY, KEPT_USAGE_OUT_OF_STEP, STOCK_OUT_OF_STEP)
_NEEDS_DB = "needs --db: the Placement API does not show these records"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    detail: str
    provider: str | None = None  # uuid, or the missing provider's internal id as text
    resource_class: str | None = None
    consumer: str | None = None
    used: int | None = None
    capacity: float | None = None


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ran: bool
    reason: str | None = None  # why it did not run


@dataclass(frozen=True, slots=True)
class AuditReport:
    source: str
    checks: list[Check]
    findings: list[Finding]


def _capacity(total: int, reserved: int, ratio: float) -> float:
    return (total - reserved) * ratio


def _over(provider: str, rc: str, used: int, total: int, reserved: int, ratio: float) -> Finding:
    capacity = _capacity(total, reserved, ratio)
    return Finding(USAGE_OVER_CAPACITY, f"{used} {rc} used, capacity {capacity:g} "
                   f"(total {total}, reserved {reserved}, allocation ratio {ratio:g})",
                   provider=provider, resource_class=rc, used=used, capacity=capacity)


# --- database -------------------------------------------------------------------------

def audit_database(engine: Engine, source: str, bars: Bars) -> AuditReport:
    bars.add("checks", len(CHECKS))
    findings: list[Finding] = []
    with engine.connect() as conn:
        for check in (_consumers_without_allocations, _allocations_on_missing_providers, _usage, _kept_usage,
                      _stock):
            findings += check(conn)
            bars.step("checks", 2 if check is _usage else 1)
    return AuditReport(source, [Check(name, True) for name in CHECKS], findings)


def _consumers_without_allocations(conn) -> list[Finding]:
    c, a = t.consumers, t.allocations
    rows = conn.execute(
        select(c.c.uuid, t.projects.c.external_id, t.users.c.external_id)
        .select_from(c.outerjoin(t.projects, t.projects.c.id == c.c.project_id)
                     .outerjoin(t.users, t.users.c.id == c.c.user_id))
        .where(~select(a.c.id).where(a.c.consumer_id == c.c.id).exists())
        .order_by(c.c.uuid))
    return [Finding(CONSUMER_WITHOUT_ALLOCATIONS, f"consumer of project {project} and user {user} has no allocations",
                    consumer=uuid) for uuid, project, user in rows]


def _allocations_on_missing_providers(conn) -> list[Finding]:
    a, rp, rc, c = t.allocations, t.resource_providers, t.resource_classes, t.consumers
    rows = conn.execute(
        select(a.c.resource_provider_id, rc.c.name, c.c.uuid, func.sum(a.c.used))
        .select_from(a.outerjoin(rp, rp.c.id == a.c.resource_provider_id)
                     .outerjoin(rc, rc.c.id == a.c.resource_class_id)
                     .outerjoin(c, c.c.id == a.c.consumer_id))
        .where(rp.c.id.is_(None))
        .group_by(a.c.resource_provider_id, rc.c.name, c.c.uuid)
        .order_by(a.c.resource_provider_id, c.c.uuid))
    return [Finding(ALLOCATION_ON_MISSING_PROVIDER, f"{used} {name} allocated on provider id {rp_id}, which does "
                    "not exist", provider=f"id:{rp_id}", resource_class=name, consumer=consumer, used=int(used))
            for rp_id, name, consumer, used in rows]


def _usage(conn) -> list[Finding]:
    """Usage per (existing provider, class) against its inventory, if any."""
    a, rp, rc, inv = t.allocations, t.resource_providers, t.resource_classes, t.inventories
    usage = (select(a.c.resource_provider_id, a.c.resource_class_id, func.sum(a.c.used).label("used"))
             .group_by(a.c.resource_provider_id, a.c.resource_class_id).subquery())
    rows = conn.execute(
        select(rp.c.uuid, rc.c.name, usage.c.used, inv.c.total, inv.c.reserved, inv.c.allocation_ratio)
        .select_from(usage.join(rp, rp.c.id == usage.c.resource_provider_id)
                     .join(rc, rc.c.id == usage.c.resource_class_id)
                     .outerjoin(inv, and_(inv.c.resource_provider_id == usage.c.resource_provider_id,
                                          inv.c.resource_class_id == usage.c.resource_class_id)))
        .order_by(rp.c.uuid, rc.c.name))
    findings = []
    for uuid, name, used, total, reserved, ratio in rows:
        used = int(used)
        if total is None:
            findings.append(Finding(ALLOCATION_WITHOUT_INVENTORY, f"{used} {name} allocated without a {name} "
                                    "inventory", provider=uuid, resource_class=name, used=used))
        elif used > _capacity(total, reserved, ratio):
            findings.append(_over(uuid, name, used, total, reserved, ratio))
    return findings


def _kept_usage(conn) -> list[Finding]:
    found = allocations.usage_out_of_step(conn)
    if not found:
        return []
    rp, rc = t.resource_providers, t.resource_classes
    uuid_of = dict(conn.execute(select(rp.c.id, rp.c.uuid).where(rp.c.id.in_({f.provider_id for f in found}))).all())
    name_of = dict(conn.execute(select(rc.c.id, rc.c.name).where(rc.c.id.in_({f.class_id for f in found}))).all())
    return [Finding(KEPT_USAGE_OUT_OF_STEP,
                    f"kept usage {f.kept} {name_of[f.class_id]} but its allocations sum to {f.allocated}: "
                    "candidates see the wrong free capacity ('--recount-usage' sets it from the allocations)",
                    provider=uuid_of[f.provider_id], resource_class=name_of[f.class_id], used=f.allocated)
            for f in found]


def _stock(conn) -> list[Finding]:
    ids = stock.out_of_step(conn)
    if not ids:
        return []
    rp = t.resource_providers
    uuid_of = dict(conn.execute(select(rp.c.id, rp.c.uuid).where(rp.c.id.in_(ids))).all())
    return [Finding(STOCK_OUT_OF_STEP, "its stock (what sampled candidate searches read) differs from its "
                    "inventory rows ('--recount-usage' recomputes it)", provider=uuid_of[i]) for i in ids]


def recount_usage(engine: Engine) -> int:
    """Set every inventory's kept usage from its allocations and every
    provider's stock from its inventories; the rows changed."""
    with engine.begin() as conn:
        return allocations.recount_usage(conn)


# --- HTTP -----------------------------------------------------------------------------

def audit_http(http: PlacementHttp, bars: Bars, *, workers: int = 8) -> AuditReport:
    http.negotiate()
    listed = http.get("/resource_providers")["resource_providers"]
    bars.add("providers", len(listed))

    def one(provider: dict) -> list[Finding]:
        where = path("resource_providers", provider["uuid"])
        inventories = http.get(where + "/inventories")["inventories"]
        used = http.get(where + "/usages")["usages"]
        return [_over(provider["uuid"], rc, used[rc], inv["total"], inv["reserved"], inv["allocation_ratio"])
                for rc, inv in sorted(inventories.items())
                if used.get(rc, 0) > _capacity(inv["total"], inv["reserved"], inv["allocation_ratio"])]

    findings = [f for found in parallel(one, listed, workers=workers, done=lambda: bars.step("providers"))
                for f in found]
    checks = [Check(name, name == USAGE_OVER_CAPACITY, None if name == USAGE_OVER_CAPACITY else _NEEDS_DB)
              for name in CHECKS]
    return AuditReport(http.url, checks, findings)
