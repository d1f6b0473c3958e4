"""Turn per-group candidates into allocation requests for one anchor tree
(docs/design/allocation-candidates.md#merging-groups): cartesian product
across groups, ``group_policy=isolate``, ``same_subtree``, consolidation with a capacity re-check, the nested-blind
filter of old microversions, and de-duplication.

Everything here works on integer ids and plain tuples; it is pure Python and
never touches the database (the few facts it needs are passed in).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from typing import NamedTuple

from billeting.placement.candidates.model import CandidateRequest
from billeting.placement.candidates.search import GroupCandidates

Triple = tuple[int, int, int]  # (provider id, resource class id, amount)


class Solution(NamedTuple):
    """One way to satisfy one group. (A named tuple: thousands are made per
    answer, and a frozen dataclass costs three times as much to create.)"""

    triples: tuple[Triple, ...]
    mapped: tuple[int, ...]  # providers reported in mappings for the group
    single: int | None  # the provider of a suffixed group (for isolate / same_subtree)


@dataclass(slots=True, frozen=True)
class Fact:
    """What the re-check of a summed amount needs about one (provider, class)."""

    capacity: int  # int((total - reserved) * allocation_ratio)
    used: int
    max_unit: int


@dataclass(slots=True)
class Pick:
    """One allocation request, still in ids."""

    amounts: dict[tuple[int, int], int]  # (provider, class) -> amount
    mappings: tuple[tuple[int, ...], ...]  # per group, in request order


def shared_pairs(groups: list[GroupCandidates]) -> tuple[set[int], set[int]]:
    """Providers and classes that more than one group may draw the same class from:
    only their sums can exceed what each group checked on its own."""
    if not _may_overlap(groups):
        return set(), set()  # (no class is asked for twice: nothing to look at)
    seen: dict[tuple[int, int], int] = {}
    for index, found in enumerate(groups):
        for per_anchor in found.by_anchor.values():
            if found.split:
                pairs = ((p, rc) for rc, ps in per_anchor.items() for p in ps)
            else:
                pairs = ((p, rc) for p in per_anchor for rc in found.group.resources)
            for pair in pairs:
                if seen.setdefault(pair, index) != index:
                    seen[pair] = -1
    doubled = [pair for pair, owner in seen.items() if owner == -1]
    return {p for p, _ in doubled}, {rc for _, rc in doubled}


class Combiner:
    def __init__(self, request: CandidateRequest, groups: list[GroupCandidates],
                 root_of: dict[int, int], parents: dict[int, int],
                 facts: dict[tuple[int, int], Fact]) -> None:
        self.request = request
        self.groups = groups
        self.root_of = root_of
        self.parents = parents
        self.facts = facts
        self.isolate = request.group_policy == "isolate"
        index = {found.group.suffix: i for i, found in enumerate(groups)}
        self.subtrees = [tuple(index[s] for s in sorted(st)) for st in request.same_subtree]
        self.nested_blind = not request.nested_aware
        self._chains: dict[int, frozenset[int]] = {}
        # Can two groups draw the same class from the same provider? Only then
        # do amounts have to be summed and re-checked.
        self.overlapping = _may_overlap(groups)

    def anchors(self) -> list[int]:
        """Roots that every group can be satisfied in."""
        common = set(self.groups[0].by_anchor)
        for found in self.groups[1:]:
            common &= found.by_anchor.keys()
        return sorted(common)

    def plain(self) -> bool:
        """Can every result be a plain tuple of providers, one per group (see
        ``singles``)? Each group takes all its classes from one provider, no
        two groups ask for the same class (so nothing is summed or
        re-checked), and no per-combination rule other than same_subtree."""
        return (not self.isolate and not self.overlapping and not self.nested_blind
                and all(not found.split and found.group.resources for found in self.groups))

    def singles(self, anchor: int) -> list[tuple[int, ...]]:
        """The results of ``anchor`` as ``(provider of group 0, of group 1,
        ...)``, in the order ``picks`` gives them; only when ``plain()``."""
        lists = []
        for found in self.groups:
            providers = found.by_anchor.get(anchor)
            if not providers:
                return []
            lists.append(providers)
        combos = product(*lists)
        for st in self.subtrees:
            if len(st) == 2:
                # Which pairs share a subtree, decided once per pair of providers.
                i, j = st
                above = self._above
                together = {(a, b) for a in lists[i] for b in lists[j] if above(a, b) or above(b, a)}
                combos = [c for c in combos if (c[i], c[j]) in together]
            else:
                combos = [c for c in combos if self._same_subtree(tuple(c[k] for k in st))]
        return list(combos)

    def picks(self, anchor: int) -> Iterator[Pick]:
        per_group = []
        for found in self.groups:
            solutions = self._solutions(found, anchor)
            if not solutions:
                return
            per_group.append(solutions)
        isolate, overlapping, nested_blind = self.isolate, self.overlapping, self.nested_blind
        # same_subtree of two groups (the common case) is checked inline: this
        # loop runs once per combination, thousands of times per answer.
        pairs = [st for st in self.subtrees if len(st) == 2]
        wider = [st for st in self.subtrees if len(st) != 2]
        chain = self._chain
        for combo in product(*per_group):
            if isolate:
                singles = [s.single for s in combo if s.single is not None]
                if len(set(singles)) != len(singles):
                    continue
            elsewhere = False
            for i, j in pairs:
                a, b = combo[i].single, combo[j].single
                if a != b and a not in chain(b) and b not in chain(a):
                    elsewhere = True
                    break
            if elsewhere:
                continue
            if wider and not all(self._same_subtree(tuple(combo[i].single for i in st)) for st in wider):
                continue
            if overlapping:
                amounts = self._summed(combo)
                if amounts is None:
                    continue
            else:
                amounts = {(p, rc): amount for solution in combo for p, rc, amount in solution.triples}
            if nested_blind and not self._one_per_tree(amounts):
                continue
            yield Pick(amounts, tuple(s.mapped for s in combo))

    def _summed(self, combo) -> dict[tuple[int, int], int] | None:
        """Amounts of ``combo`` summed per (provider, class); None when a sum
        no longer fits."""
        amounts: dict[tuple[int, int], int] = {}
        summed = None
        for solution in combo:
            for provider, rc, amount in solution.triples:
                key = (provider, rc)
                if key in amounts:
                    amounts[key] += amount
                    summed = summed or set()
                    summed.add(key)
                else:
                    amounts[key] = amount
        if summed and not all(self._fits(key, amounts[key]) for key in summed):
            return None
        return amounts

    # --- helpers ------------------------------------------------------------

    def _solutions(self, found: GroupCandidates, anchor: int) -> list[Solution]:
        group = found.group
        if not found.split:
            providers = found.by_anchor.get(anchor)
            if not providers:
                return []
            items = tuple(group.resources.items())
            single = group.suffixed
            return [Solution(tuple([(p, rc, amount) for rc, amount in items]), (p,), p if single else None)
                    for p in providers]
        per_class = found.by_anchor.get(anchor)
        if not per_class:
            return []
        classes = found.split
        out = []
        for combo in product(*(per_class[rc] for rc in classes)):
            chosen = set(combo)
            if group.required:
                have: set[int] = set()
                for p in chosen:
                    have |= found.traits_of.get(p, set())
                if not all(have & any_of for any_of in group.required):
                    continue
            triples = tuple((p, rc, group.resources[rc]) for p, rc in zip(combo, classes))
            out.append(Solution(triples, tuple(sorted(chosen)), None))
        return out

    def _chain(self, provider: int) -> frozenset[int]:
        """The provider and all its ancestors."""
        chain = self._chains.get(provider)
        if chain is None:
            seen = [provider]
            parent = self.parents.get(provider)
            while parent is not None and parent not in seen:
                seen.append(parent)
                parent = self.parents.get(parent)
            chain = self._chains[provider] = frozenset(seen)
        return chain

    def _above(self, top: int, provider: int) -> bool:
        """``top`` is ``provider`` or one of its ancestors (a walk up the tree:
        cheaper than ``_chain`` for a question asked once)."""
        parents = self.parents
        for _ in range(len(parents) + 1):  # (bounded, should the data hold a cycle)
            if provider == top:
                return True
            provider = parents.get(provider)
            if provider is None:
                return False
        return False

    def _same_subtree(self, providers: tuple[int, ...]) -> bool:
        """One of ``providers`` is an ancestor-or-self of all the others."""
        if len(providers) == 2:  # the common case, answered without building sets
            a, b = providers
            return a == b or a in self._chain(b) or b in self._chain(a)
        distinct = set(providers)
        return len(distinct) <= 1 or any(all(top in self._chain(p) for p in distinct) for top in distinct)

    def _fits(self, key: tuple[int, int], amount: int) -> bool:
        fact = self.facts.get(key)
        return fact is not None and amount <= fact.max_unit and fact.used + amount <= fact.capacity

    def _one_per_tree(self, amounts: dict[tuple[int, int], int]) -> bool:
        providers = {p for p, _ in amounts}
        roots = {self.root_of[p] for p in providers}
        return len(roots) == len(providers)


def _may_overlap(groups: list[GroupCandidates]) -> bool:
    """Could one provider be chosen by two groups for the same class?"""
    seen: set[int] = set()
    for found in groups:
        classes = set(found.group.resources)
        if classes & seen:
            return True
        seen |= classes
    return False


def dedupe_key(pick: Pick | tuple[int, ...]) -> tuple:
    if isinstance(pick, tuple):  # a plain pick (Combiner.singles) is its own key
        return pick
    return frozenset(pick.amounts.items()), pick.mappings
