"""The checker catches each kind of broken end state it is fed."""
from billeting.placement_client.model import Inventory
from billeting.sim.checker import GroupExpect, InstanceExpect, PlacementState, ProviderState, check


def _state(consumers, traits=None, ratio=1.0, reserved=0):
    traits = traits or {}
    providers = {}
    for i in range(4):
        uuid = f"h{i}"
        providers[uuid] = ProviderState(uuid=uuid, name=f"host{i}", root=uuid,
                                        inventories={"VCPU": Inventory(8, reserved=reserved, allocation_ratio=ratio),
                                                     "MEMORY_MB": Inventory(1024)},
                                        traits=frozenset(traits.get(uuid, ())))
    providers["h0_gpu"] = ProviderState(uuid="h0_gpu", name="host0_gpu", root="h0",
                                        inventories={"VGPU": Inventory(2)}, traits=frozenset({"CUSTOM_GPU"}))
    return PlacementState(providers=providers, consumers=consumers)


# Layout: h0, h1 in rack0 (row0); h2 in rack1 (row0); h3 in rack2 (row1), all in cell1.
TOPO = {"h0": {"rack": "rack0", "row": "row0", "room": "room0", "cell": "cell1"},
        "h1": {"rack": "rack0", "row": "row0", "room": "room0", "cell": "cell1"},
        "h2": {"rack": "rack1", "row": "row0", "room": "room0", "cell": "cell1"},
        "h3": {"rack": "rack2", "row": "row1", "room": "room0", "cell": "cell1"}}


def test_a_legal_state_has_no_violations():
    state = _state({"a": {"h0": {"VCPU": 4}}, "b": {"h0": {"VCPU": 4}, "h0_gpu": {"VGPU": 2}}})
    assert check(state, {}, {}, TOPO) == []


def test_capacity_overcommit_is_caught_with_ratio_and_reserved():
    over = _state({"a": {"h1": {"VCPU": 6}}, "b": {"h1": {"VCPU": 3}}})
    found = check(over, {}, {}, TOPO)
    assert [(v.kind, v.host) for v in found] == [("capacity", "host1")]
    # A ratio of 2 makes 9 of 16 legal; 2 reserved at ratio 1 makes 7 of 6 illegal.
    assert check(_state({"a": {"h1": {"VCPU": 9}}}, ratio=2.0), {}, {}, TOPO) == []
    assert check(_state({"a": {"h1": {"VCPU": 7}}}, reserved=2), {}, {}, TOPO)[0].kind == "capacity"
    # A class the provider has no inventory of is an overcommit too.
    assert check(_state({"a": {"h1": {"VGPU": 1}}}), {}, {}, TOPO)[0].kind == "capacity"


def test_required_and_forbidden_traits_are_checked_over_the_providers_used():
    state = _state({"a": {"h0": {"VCPU": 1}, "h0_gpu": {"VGPU": 1}}, "b": {"h1": {"VCPU": 1}}},
                   traits={"h1": {"HW_CPU_X86_AVX2"}})
    ok = {"a": InstanceExpect(uuid="a", required=frozenset({"CUSTOM_GPU"}))}
    assert check(state, ok, {}, TOPO) == []
    bad = {"a": InstanceExpect(uuid="a", forbidden=frozenset({"CUSTOM_GPU"})),
           "b": InstanceExpect(uuid="b", required=frozenset({"HW_CPU_X86_AVX512F"}))}
    found = check(state, bad, {}, TOPO)
    assert sorted((v.kind, v.instance) for v in found) == [("trait", "a"), ("trait", "b")]


def _group(policy, scope, members, n=1):
    insts = {m: InstanceExpect(uuid=m, group="g") for m in members}
    return insts, {"g": GroupExpect(uuid="g", policy=policy, scope=scope, max_server_per_host=n)}


def test_anti_affinity_is_checked_at_every_level():
    state = _state({"a": {"h0": {"VCPU": 1}}, "b": {"h1": {"VCPU": 1}}, "c": {"h3": {"VCPU": 1}}})
    insts, groups = _group("anti-affinity", "host", "abc")
    assert check(state, insts, groups, TOPO) == []
    insts, groups = _group("anti-affinity", "rack", "abc")
    found = check(state, insts, groups, TOPO)
    assert [(v.kind, v.level) for v in found] == [("anti-affinity", "rack")]
    insts, groups = _group("anti-affinity", "row", "ac")
    assert check(state, insts, groups, TOPO) == []
    insts, groups = _group("anti-affinity", "cell", "ac")
    assert [(v.kind, v.level) for v in check(state, insts, groups, TOPO)] == [("anti-affinity", "cell")]
    insts, groups = _group("anti-affinity", "room", "ac")
    assert [(v.kind, v.level) for v in check(state, insts, groups, TOPO)] == [("anti-affinity", "room")]


def test_max_server_per_host():
    state = _state({"a": {"h2": {"VCPU": 1}}, "b": {"h2": {"VCPU": 1}}, "c": {"h2": {"VCPU": 1}}})
    insts, groups = _group("anti-affinity", "host", "abc", n=2)
    found = check(state, insts, groups, TOPO)
    assert [(v.kind, v.host) for v in found] == [("anti-affinity", "host2")]
    insts, groups = _group("anti-affinity", "host", "abc", n=3)
    assert check(state, insts, groups, TOPO) == []


def test_affinity_is_checked_at_its_scope():
    state = _state({"a": {"h0": {"VCPU": 1}}, "b": {"h1": {"VCPU": 1}}})
    insts, groups = _group("affinity", "host", "ab")
    assert [(v.kind, v.level) for v in check(state, insts, groups, TOPO)] == [("affinity", "host")]
    insts, groups = _group("affinity", "rack", "ab")
    assert check(state, insts, groups, TOPO) == []


def test_soft_policies_are_not_rules():
    state = _state({"a": {"h0": {"VCPU": 1}}, "b": {"h0": {"VCPU": 1}}})
    insts, groups = _group("soft-anti-affinity", "host", "ab")
    assert check(state, insts, groups, TOPO) == []
