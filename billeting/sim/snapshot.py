"""The checker's view of an in-process Placement, read from its tables.

Through the public API the checker needs two reads per provider (its
inventories and its allocations): 10,000 calls at 5,000 hosts, a sixth of
a short run's time. An in-process run owns its database, so it reads the
same facts in four statements instead. They read the raw rows (inventories
as written, one row per allocation) and none of Placement's derived state
(kept usage, stock): the checker still re-adds capacity itself, so a
Placement that kept its usage wrong cannot pass by agreeing with itself.
``tests/sim/test_checker.py`` holds it to the API read on a run's end state.
"""
from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Engine, select
from sqlalchemy.orm import aliased

from billeting.placement.store import tables as t
from billeting.placement_client.model import Inventory
from billeting.sim.checker import SHARING, PlacementState, ProviderState

_rp = t.resource_providers
_root = aliased(t.resource_providers)
_rc = t.resource_classes
_inv = t.inventories
_a = t.allocations
_c = t.consumers

_PROVIDERS = select(_rp.c.id, _rp.c.uuid, _rp.c.name, _root.c.uuid).select_from(
    _rp.outerjoin(_root, _root.c.id == _rp.c.root_provider_id))
_INVENTORIES = select(_inv.c.resource_provider_id, _rc.c.name, _inv.c.total, _inv.c.reserved, _inv.c.min_unit,
                      _inv.c.max_unit, _inv.c.step_size, _inv.c.allocation_ratio).select_from(
    _inv.join(_rc, _rc.c.id == _inv.c.resource_class_id))
_TRAITS = select(t.resource_provider_traits.c.resource_provider_id, t.traits.c.name).select_from(
    t.resource_provider_traits.join(t.traits, t.traits.c.id == t.resource_provider_traits.c.trait_id))
_ALLOCATIONS = select(_c.c.uuid, _a.c.resource_provider_id, _rc.c.name, _a.c.used).select_from(
    _a.join(_c, _c.c.id == _a.c.consumer_id).join(_rc, _rc.c.id == _a.c.resource_class_id))


def read_state(engine: Engine, only: set[str] | None = None, traits: set[str] | None = None) -> PlacementState:
    """What ``checker.read_state`` reads through the API, with the same
    meaning of ``only`` (the providers to keep) and ``traits`` (the traits
    the checks look at; None: all of them)."""
    wanted = None if traits is None else {*traits, SHARING}
    with engine.connect() as conn, conn.begin():
        providers = {pid: (uuid, name, root or uuid) for pid, uuid, name, root in conn.execute(_PROVIDERS)
                     if only is None or uuid in only}
        inventories: dict[int, dict[str, Inventory]] = defaultdict(dict)
        for pid, rc, total, reserved, min_unit, max_unit, step, ratio in conn.execute(_INVENTORIES):
            if pid in providers:
                inventories[pid][rc] = Inventory(total=int(total), reserved=int(reserved), min_unit=int(min_unit),
                                                 max_unit=int(max_unit), step_size=int(step),
                                                 allocation_ratio=float(ratio))
        having: dict[int, set[str]] = defaultdict(set)
        for pid, name in conn.execute(_TRAITS):
            if pid in providers and (wanted is None or name in wanted):
                having[pid].add(name)
        consumers: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for consumer, pid, rc, used in conn.execute(_ALLOCATIONS):
            if pid in providers:
                held = consumers[consumer].setdefault(providers[pid][0], {})
                held[rc] = held.get(rc, 0) + int(used)
    return PlacementState(
        providers={uuid: ProviderState(uuid=uuid, name=name, root=root, inventories=inventories.get(pid, {}),
                                       traits=frozenset(having.get(pid, ())))
                   for pid, (uuid, name, root) in providers.items()},
        consumers=dict(consumers))
