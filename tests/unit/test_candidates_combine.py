"""The pure-Python combination step of the candidates engine
(docs/design/allocation-candidates.md#merging-groups)."""
from __future__ import annotations

from billeting.placement.candidates.combine import Combiner, Fact, dedupe_key, shared_pairs
from billeting.placement.candidates.model import CandidateRequest, ResolvedGroup
from billeting.placement.candidates.search import GroupCandidates

VCPU, MEM, DISK = 0, 1, 2
# tree: 1 (root) -> 2, 3 ; 3 -> 4 ; sharing provider 9 is its own root
ROOT_OF = {1: 1, 2: 1, 3: 1, 4: 1, 9: 9}
PARENTS = {2: 1, 3: 1, 4: 3}


def single(suffix: str, resources: dict[int, int], by_anchor: dict[int, list[int]]) -> GroupCandidates:
    return GroupCandidates(ResolvedGroup(suffix, resources), tree_wide=False, by_anchor=by_anchor)


def combiner(groups, *, policy=None, same_subtree=(), nested_aware=True, facts=None) -> Combiner:
    request = CandidateRequest(groups=tuple(g.group for g in groups), group_policy=policy,
                               same_subtree=tuple(frozenset(s) for s in same_subtree), nested_aware=nested_aware)
    return Combiner(request, groups, ROOT_OF, PARENTS, facts or {})


def picks(c: Combiner, anchor: int = 1) -> list[tuple]:
    return sorted((sorted(p.amounts.items()), p.mappings) for p in c.picks(anchor))


def test_isolate_requires_distinct_suffixed_providers():
    groups = [single("1", {VCPU: 1}, {1: [2, 3]}), single("2", {VCPU: 1}, {1: [2, 3]})]
    assert picks(combiner(groups, policy="isolate")) == [
        ([((2, VCPU), 1), ((3, VCPU), 1)], ((2,), (3,))),
        ([((2, VCPU), 1), ((3, VCPU), 1)], ((3,), (2,))),
    ]
    roomy = {(p, VCPU): Fact(capacity=8, used=0, max_unit=8) for p in (2, 3)}
    none = picks(combiner(groups, policy="none", facts=roomy))
    assert len(none) == 4 and ([((2, VCPU), 2)], ((2,), (2,))) in none


def test_isolate_ignores_the_unsuffixed_group():
    groups = [single("", {MEM: 1}, {1: [2]}), single("1", {VCPU: 1}, {1: [2]})]
    assert picks(combiner(groups, policy="isolate")) == [([((2, VCPU), 1), ((2, MEM), 1)], ((2,), (2,)))]


def test_same_subtree_needs_an_ancestor_among_the_chosen():
    groups = [single("_A", {VCPU: 1}, {1: [2, 3]}), single("_B", {DISK: 1}, {1: [3, 4]})]
    got = picks(combiner(groups, policy="none", same_subtree=[{"_A", "_B"}]))
    # 2 is a sibling of 3 and an uncle of 4: only the choices under 3 remain
    assert [m for _, m in got] == [((3,), (3,)), ((3,), (4,))]


def test_summed_amounts_are_rechecked_against_capacity_and_max_unit():
    groups = [single("1", {VCPU: 2}, {1: [2]}), single("2", {VCPU: 2}, {1: [2]})]
    assert picks(combiner(groups, policy="none", facts={(2, VCPU): Fact(capacity=4, used=0, max_unit=4)}))
    assert not picks(combiner(groups, policy="none", facts={(2, VCPU): Fact(capacity=4, used=1, max_unit=4)}))
    assert not picks(combiner(groups, policy="none", facts={(2, VCPU): Fact(capacity=8, used=0, max_unit=3)}))
    assert shared_pairs(groups) == ({2}, {VCPU})


def test_nested_blind_drops_two_providers_of_one_tree():
    groups = [single("1", {VCPU: 1}, {1: [2]}), single("2", {DISK: 1}, {1: [3, 9]})]
    assert [m for _, m in picks(combiner(groups, policy="none", nested_aware=False))] == [((2,), (9,))]
    assert len(picks(combiner(groups, policy="none"))) == 2


def test_split_unsuffixed_group_checks_traits_of_contributors_only():
    group = ResolvedGroup("", {VCPU: 1, DISK: 1}, required=(frozenset({7}),))
    found = GroupCandidates(group, tree_wide=True, split=(VCPU, DISK),
                            by_anchor={1: {VCPU: [2, 3], DISK: [3, 9]}}, traits_of={3: {7}, 1: {7}})
    got = picks(combiner([found]))
    assert [m for _, m in got] == [((2, 3),), ((3,),), ((3, 9),)]


def test_anchors_are_common_to_all_groups_and_dedupe_keys_include_mappings():
    groups = [single("1", {VCPU: 1}, {1: [2], 5: [6]}), single("2", {DISK: 1}, {1: [9], 9: [9]})]
    c = combiner(groups, policy="none")
    assert c.anchors() == [1]
    a, b = (single("1", {VCPU: 1}, {1: [2, 3]}), single("2", {VCPU: 1}, {1: [2, 3]}))
    keys = {dedupe_key(p) for p in combiner([a, b], policy="isolate").picks(1)}
    assert len(keys) == 2


def test_plain_singles_are_the_picks_in_the_same_order():
    # Three groups, same_subtree of two and of three, providers shared between groups.
    groups = [single("", {DISK: 1}, {1: [1, 3]}), single("_A", {VCPU: 1}, {1: [2, 3, 4]}),
              single("_B", {MEM: 1}, {1: [3, 4, 2]}), single("_C", {9: 1}, {1: [4, 1]})]
    for same_subtree in ([], [{"_A", "_B"}], [{"_A", "_B", "_C"}], [{"_A"}], [{"_A", "_C"}, {"_B", "_C"}]):
        c = combiner(groups, policy="none", same_subtree=same_subtree)
        assert c.plain()
        expected = [tuple(m[0] for m in p.mappings) for p in c.picks(1)]
        assert c.singles(1) == expected and expected
        # each pick takes each group's resources from its one provider
        for p, plain in zip(c.picks(1), c.singles(1)):
            assert p.amounts == {(provider, rc): amount for provider, g in zip(plain, groups)
                                 for rc, amount in g.group.resources.items()}
    assert combiner(groups[:3], policy="none", same_subtree=[{"_A", "_B"}]).singles(1) == [
        (d, a, b) for d in (1, 3) for a, b in ((2, 2), (3, 3), (3, 4), (4, 3), (4, 4))]  # 2 is apart from 3, 4


def test_not_plain_where_a_pick_needs_more_than_its_providers():
    a, b = single("_A", {VCPU: 1}, {1: [2]}), single("_B", {DISK: 1}, {1: [3]})
    assert combiner([a, b], policy="none").plain()
    assert not combiner([a, b], policy="isolate").plain()
    assert not combiner([a, b], policy="none", nested_aware=False).plain()
    assert not combiner([a, single("_B", {VCPU: 1}, {1: [3]})], policy="none").plain()  # summed
    assert not combiner([a, single("_B", {}, {1: [3]})], policy="none").plain()  # resourceless
