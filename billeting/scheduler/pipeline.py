"""Filter → weigh → pick, for one instance, as a chain of small stages.

    hosts Placement offered (capacity, traits, aggregates already checked)
      │ filters, cheapest first; a stage with nothing to check is skipped;
      │ filtering stops as soon as no host is left       O(hosts) each
      ▼
    weighers: raw value per host, normalized, × multiplier, summed
      │                                                  O(hosts × weighers)
      ▼
    sort by weight; shuffle ties at the top if asked;
    pick at random among the best ``host_subset_size``   O(hosts log hosts)
      ▼
    ranked list: the pick first, then the rest best first (the claim
    walks it when a claim loses, alternates are taken from it)

The stages record what they did (hosts removed per filter, each weigher's
score) for "no valid host" explanations and dry runs.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import is_, itemgetter

import numpy as np

from billeting.scheduler import filters as filters_mod
from billeting.scheduler import weighers as weighers_mod
from billeting.scheduler.decision import Decision
from billeting.scheduler.hoststate import HostState
from billeting.scheduler.settings import SchedulerSettings

ANTI_POLICIES = ("anti-affinity", "soft-anti-affinity")


@dataclass(slots=True)
class FilterStep:
    name: str
    explains: str
    before: int
    removed: int
    once_per_request: bool = False


@dataclass(slots=True)
class Ranked:
    host: HostState
    weight: float
    # weigher name → its weighted contribution (only when scores were asked for)
    scores: dict[str, float] = field(default_factory=dict)


class RankedList(Sequence[Ranked]):
    """Hosts best first, made into ``Ranked`` entries only when read: the
    claim usually takes the first and alternates a few more, so building a
    thousand entries up front would be wasted."""

    __slots__ = ("hosts", "weights", "order", "shares", "frame")

    def __init__(self, hosts: list[HostState], weights: list[float], order: list[int],
                 shares: list[tuple[str, list[float]]] | None = None, frame: "RawFrame | None" = None) -> None:
        self.hosts, self.weights, self.order, self.shares = hosts, weights, order, shares
        self.frame = frame  # what is known of ``hosts`` across rankings, if kept

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.order)))]
        k = self.order[i]
        scores = {name: values[k] for name, values in self.shares} if self.shares else {}
        return Ranked(self.hosts[k], self.weights[k], scores)

    def __iter__(self):
        hosts, weights, shares = self.hosts, self.weights, self.shares
        for k in self.order:
            yield Ranked(hosts[k], weights[k], {n: v[k] for n, v in shares} if shares else {})

    def host(self, i: int) -> HostState:
        """The host at rank ``i``, without making its ``Ranked`` entry."""
        return self.hosts[self.order[i]]

    def positions_in_cell(self, cell_uuid: str, excluded: set[str]) -> list[int]:
        """Ranks (best first) of the hosts of ``cell_uuid`` not in ``excluded``
        (one comprehension: alternates ask it of every ranking)."""
        order = self.order
        frame = self.frame
        if frame is not None and frame.cells() == {cell_uuid}:
            # Every host is of that cell (known once per list of hosts, not
            # per ranking): every rank but those of the few excluded hosts.
            where = frame.positions()
            skip = {order.index(k) for k in map(where.get, excluded) if k is not None}
            return [i for i in range(len(order)) if i not in skip] if skip else list(range(len(order)))
        hosts = self.hosts
        return [i for i, k in enumerate(order)
                if (h := hosts[k]).record.cell_uuid == cell_uuid and h.uuid not in excluded]

    def moved_to_front(self, i: int) -> "RankedList":
        order = self.order
        return RankedList(self.hosts, self.weights, [order[i]] + order[:i] + order[i + 1:], self.shares,
                          self.frame)


class RawFrame:
    """One list of hosts and, per weigher, its raw values in that order:
    kept by a Decision between rankings while the filters leave that very
    list (changed hosts are updated in place)."""

    __slots__ = ("hosts", "raw", "_uuids", "_positions", "_cells")

    def __init__(self, hosts: list[HostState]) -> None:
        self.hosts = hosts
        self.raw: dict[str, np.ndarray] = {}
        self._uuids: list[str] | None = None
        self._positions: dict[str, int] | None = None
        self._cells: set[str] | None = None

    def holds(self, hosts: list[HostState]) -> bool:
        mine = self.hosts
        return mine is hosts or (len(mine) == len(hosts) and all(map(is_, mine, hosts)))

    def keep_in(self, caches: dict[str, dict[str, float]]) -> None:
        """Add the values to ``caches`` (weigher name → host uuid → value),
        for a ranking over another list of hosts (made only then: a
        request's rankings are usually all over one list)."""
        if self.raw:
            uuids = self.uuids()
            for name, values in self.raw.items():
                caches.setdefault(name, {}).update(zip(uuids, values.tolist()))

    def uuids(self) -> list[str]:
        """The hosts' uuids, in ``hosts`` order."""
        if self._uuids is None:
            self._uuids = [h.uuid for h in self.hosts]
        return self._uuids

    def positions(self) -> dict[str, int]:
        """Host uuid → its position in ``hosts``."""
        if self._positions is None:
            self._positions = {uuid: i for i, uuid in enumerate(self.uuids())}
        return self._positions

    def positions_of(self, uuids) -> list[int]:
        get = self.positions().get
        return [i for i in map(get, uuids) if i is not None]

    def cells(self) -> set[str]:
        """The cells of the hosts."""
        if self._cells is None:
            self._cells = {h.record.cell_uuid for h in self.hosts}
        return self._cells


class Pipeline:
    def __init__(self, settings: SchedulerSettings, rng: random.Random | None = None) -> None:
        self.settings = settings
        self.filters = filters_mod.build(settings.enabled_filters)
        self.weighers = weighers_mod.build(settings.weighers)
        self.rng = rng or random.Random()

    def filter(self, hosts: list[HostState], decision: Decision,
               trace: list[FilterStep] | None = None) -> list[HostState]:
        for f in self.filters:
            if decision.index > 0 and f.once_per_request:
                continue  # its answer cannot have changed since the first instance
            if not f.active(decision):
                continue
            before = len(hosts)
            passes = f.passes
            hosts = [h for h in hosts if passes(h, decision)]
            if trace is not None and before != len(hosts):
                trace.append(FilterStep(f.name, f.explained(decision), before, before - len(hosts), f.once_per_request))
            if not hosts:
                break
        return hosts

    def weigh(self, hosts: list[HostState], decision: Decision, *, scores: bool = False) -> RankedList:
        """Hosts best first. Raw values are kept per request and recomputed
        only where they can have changed (see ``Weigher.depends``); the
        arithmetic over all hosts is done on arrays."""
        count = len(hosts)
        if count == 0:  # nothing passed the filters (a reduction over no hosts has no value)
            return RankedList(hosts, [], [], [] if scores else None)
        if count <= 1 and not scores:
            return RankedList(hosts, [0.0] * count, list(range(count)))
        total = np.zeros(count)
        shares: list[tuple[str, np.ndarray]] = []
        changed = decision.consumption_changed()
        frame = None
        if decision.request.num_instances > 1:  # (a single instance is ranked once)
            frame = decision.raw_frame
            if frame is None or not frame.holds(hosts):
                if frame is not None:
                    frame.keep_in(decision.raw_cache)  # the values by uuid, for the new list
                frame = decision.raw_frame = RawFrame(hosts)
        for w in self.weighers:
            if not w.active(decision):
                continue
            multipliers = self._multipliers(w, hosts, decision)
            if multipliers is None:
                continue
            raw = self._raw(w, hosts, decision, changed, frame)
            if w.minval is not None or w.maxval is not None:
                raw = np.clip(raw, w.minval, w.maxval)
            lo = w.minval if w.minval is not None else raw.min()
            hi = w.maxval if w.maxval is not None else raw.max()
            if hi == lo:
                share = np.zeros(count)
            else:
                share = multipliers * ((raw - lo) / (hi - lo))
            total += share
            if scores:
                shares.append((w.name, share))
        order = self._order(total, hosts, decision)
        return RankedList(hosts, total.tolist(), order,
                          [(name, share.tolist()) for name, share in shares] if scores else None, frame)

    @staticmethod
    def _order(total: np.ndarray, hosts: list[HostState], decision: Decision) -> list[int]:
        """Best first. Among equal weights Placement's order stands (stable),
        except for an anti-affinity group: there the host whose cell holds
        fewer members comes first. Placement lists hosts roughly in the order
        they registered, often one cell after another, so without this a
        group on a uniform fleet fills the first cell and its members can
        then not move (a move stays in its cell)."""
        group = decision.request.server_group
        if group is not None and group.policy in ANTI_POLICIES and len(decision.group_cells) > 0:
            in_cell = np.fromiter((decision.group_cells[h.record.cell_uuid] for h in hosts), dtype=float,
                                  count=len(hosts))
            return np.lexsort((in_cell, -total)).tolist()  # (lexsort is stable; last key sorts first)
        return np.argsort(-total, kind="stable").tolist()

    @staticmethod
    def _raw(w, hosts: list[HostState], decision: Decision, changed: set[str],
             frame: "RawFrame | None") -> np.ndarray:
        """Raw values in ``hosts`` order, computed only where missing.

        Later instances of a request (and later requests of a batch) are
        usually ranked over the very hosts the first one was: ``frame``
        keeps one array per weigher for that list, and only the hosts a
        claim changed are weighed again. When the filters left another
        list, the values are found by uuid (``raw_cache``), weighing only
        the hosts not seen yet or changed."""
        if frame is None or w.depends == "group":
            return np.array(w.values(hosts, decision), dtype=float)
        kept = frame.raw.get(w.name)
        if kept is not None:
            if w.depends == "usage" and changed:
                where = frame.positions_of(changed)
                if where:
                    kept[where] = w.values([hosts[i] for i in where], decision)
                cache = decision.raw_cache.get(w.name)
                if cache:
                    for uuid in changed:
                        cache.pop(uuid, None)  # weighed again if it is ranked by uuid again
            return kept
        cache = decision.raw_cache.get(w.name)
        if cache is None:
            found = frame.raw[w.name] = np.array(w.values(hosts, decision), dtype=float)
            return found
        uuids = frame.uuids()
        if w.depends == "usage" and changed:
            at = frame.positions()
            again = []
            for uuid in changed:
                i = at.get(uuid)
                if i is None:
                    cache.pop(uuid, None)  # weighed again if it is ever ranked again
                else:
                    again.append(hosts[i])
            if again:
                cache.update(zip((h.uuid for h in again), w.values(again, decision)))
        try:
            values = itemgetter(*uuids)(cache)
        except KeyError:  # hosts this request has not weighed yet
            missing = [h for h in hosts if h.uuid not in cache]
            cache.update(zip((h.uuid for h in missing), w.values(missing, decision)))
            values = itemgetter(*uuids)(cache)
        found = frame.raw[w.name] = np.array(values if len(uuids) > 1 else [values], dtype=float)
        return found

    @staticmethod
    def _multipliers(w, hosts: list[HostState], decision: Decision):
        """A scalar when no aggregate overrides the weigher (the usual case),
        else one value per host; None when the weigher weighs nothing."""
        if not decision.directory.overrides(w.option):
            value = decision.settings.multiplier(w.option)
            return value if value else None
        known = decision.multiplier_cache.setdefault(w.name, {})
        values = []
        for h in hosts:
            m = known.get(h.uuid)
            if m is None:
                m = known[h.uuid] = w.multiplier(h, decision)
            values.append(m)
        found = np.array(values)
        return found if found.any() else None

    def pick(self, ranked: RankedList) -> RankedList:
        """The list with the pick moved to the front."""
        if len(ranked) < 2:
            return ranked
        if self.settings.shuffle_best_same_weighed_hosts:
            weights, order = ranked.weights, ranked.order
            top = weights[order[0]]
            ties = 1
            while ties < len(order) and weights[order[ties]] == top:
                ties += 1
            head = order[:ties]
            self.rng.shuffle(head)
            ranked = RankedList(ranked.hosts, weights, head + order[ties:], ranked.shares, ranked.frame)
        pool = min(self.settings.host_subset_size, len(ranked))
        if pool == 1:
            return ranked
        return ranked.moved_to_front(self.rng.randrange(pool))

    def rank(self, hosts: list[HostState], decision: Decision,
             trace: list[FilterStep] | None = None, *, scores: bool = False) -> tuple[list[HostState], RankedList]:
        """(hosts that passed the filters, ranked list with the pick first)."""
        passed = self.filter(hosts, decision, trace)
        return passed, self.pick(self.weigh(passed, decision, scores=scores))
