"""Prefill of every host kind, and sharing pools of classes other than disk."""
from collections import defaultdict
from pathlib import Path

import msgspec
import pytest

from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.placement_client.model import Inventory
from billeting.sim import checker, fleet as fleet_mod, prefill as prefill_mod, runner, scenario

EVERY_KIND = Path(__file__).parent / "data" / "every-kind.toml"


def _built(tmp_path, s):
    engine = runner._sqlite_engine(tmp_path / "fleet.db")
    client = InProcessPlacementClient(engine)
    fleet = fleet_mod.build(client, s)
    placed = prefill_mod.prefill(client, s, fleet)
    ours = {p for h in fleet.hosts for p in h.providers} | fleet.sharing
    state = checker.read_state(client, only=ours)
    engine.dispose()
    return fleet, placed, state


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    s = scenario.load(EVERY_KIND)
    return (s, *_built(tmp_path_factory.mktemp("prefill"), s))


def _used(state):
    used = defaultdict(lambda: defaultdict(int))  # provider -> class -> amount
    for held in state.consumers.values():
        for rp, res in held.items():
            for rc, n in res.items():
                used[rp][rc] += n
    return used


def test_every_host_kind_starts_filled(filled):
    s, fleet, placed, state = filled
    used = _used(state)
    by_kind = defaultdict(int)
    for held in placed.values():
        by_kind[fleet.by_uuid[held.host].shape.kind] += 1
    assert set(by_kind) == {"flat", "numa", "gpu-nic", "ironic"}
    shared = {h.uuid for h in fleet.hosts if h.shape.shared_disk}
    assert any(held.host in shared for held in placed.values())
    for h in fleet.hosts:
        root, *children = h.providers
        if h.shape.kind == "numa":      # VCPU and memory come from the NUMA children
            assert not used[root].get("VCPU") and any(used[c].get("VCPU") for c in children), h.name
            assert used[root].get("DISK_GB"), h.name
        if h.shape.kind == "gpu-nic":   # the vGPU and VF flavors took children
            kids = {rc for c in children for rc in used[c]}
            assert {"VGPU", "SRIOV_NET_VF"} <= kids, (h.name, kids)
        if h.shape.shared_disk:         # their disk is the pool's
            assert not used[root].get("DISK_GB") and used[root].get("VCPU"), h.name
    assert all(used[u] for u in fleet.sharing)     # disk pools and address pools alike
    bare = [h for h in fleet.hosts if h.shape.kind == "ironic"]
    taken = sum(1 for h in bare if used[h.uuid].get("CUSTOM_BAREMETAL"))
    assert 0 < taken < len(bare)


def test_prefill_stays_within_the_target_and_the_capacity(filled):
    s, fleet, placed, state = filled
    assert checker.check(state, {}, {}, {}) == []
    used = _used(state)
    for h in fleet.hosts:
        if h.shape.kind == "ironic":
            continue
        total = defaultdict(int)
        for p in h.providers:
            for rc, n in used[p].items():
                total[rc] += n
        for rc, n in total.items():
            assert n <= s.arrivals.prefill * h.capacity[rc], (h.name, rc, n)
    for u, spec in fleet.pools.items():
        for rc, n in used[u].items():
            assert n <= s.arrivals.prefill * spec.capacity[rc] + 1, (u, rc)
    # What the simulator records is what Placement holds.
    assert {c: {rp: dict(r) for rp, r in held.allocation.items()} for c, held in placed.items()} == \
        {c: held for c, held in state.consumers.items()}


def test_prefill_is_the_same_for_a_seed(tmp_path, filled):
    s, _, placed, _ = filled
    _, again, _ = _built(tmp_path, s)
    assert again == placed
    (tmp_path / "other").mkdir()
    _, other, _ = _built(tmp_path / "other", msgspec.structs.replace(s, seed=4))
    assert other != placed


def test_a_pool_shared_by_the_cell_reaches_every_host_of_it(filled):
    s, fleet, _, _ = filled
    ips = {fleet_mod.sim_uuid("", "sharing", f"ips{c}"): f"cell{c}" for c in (1, 2)}
    for h in fleet.hosts:
        mine = set(fleet.pools_of.get(h.uuid, ()))
        assert {u for u, cell in ips.items() if cell == h.cell} <= mine, h.name
        assert not {u for u, cell in ips.items() if cell != h.cell} & mine, h.name
        nfs = {fleet_mod.sim_uuid("", "sharing", f"nfs{c}") for c in (1, 2)}
        assert bool(nfs & mine) == h.shape.shared_disk, h.name


def test_a_run_on_every_kind_draws_addresses_from_its_hosts_pool(placement):
    """Through the suite's database (every backend): the fleet, its pools and
    the run's claims on them."""
    s = scenario.load(EVERY_KIND)
    run = runner.run(s, client=placement)
    prefix = run.notes[0].rsplit("prefix ", 1)[1].removesuffix("N-")
    state = checker.read_state(placement)
    pools = {u for u, p in state.providers.items()
             if p.name.startswith(prefix) and "IPV4_ADDRESS" in p.inventories}
    assert len(pools) == 2
    assert all(state.providers[u].inventories["CUSTOM_UPLINK_GBPS"].total == 100 for u in pools)
    drew = 0
    for held in state.consumers.values():
        pool = [rp for rp in held if rp in pools]
        if not pool:
            continue
        drew += 1
        assert held[pool[0]] == {"IPV4_ADDRESS": 1}, held
        host = next(rp for rp in held if "VCPU" in held[rp])
        root = state.providers[host].root
        # the pool is in an aggregate of the host's: its own cell's pool
        assert set(placement.get_aggregates(pool[0]).aggregates) & set(placement.get_aggregates(root).aggregates)
    assert drew > 10
    d = run.designs[0]
    assert d.violations == [] and d.succeeded > 0


POOLED = """
name = "t"
[fleet]
cells = 2
[[fleet.hosts]]
name = "h"
count = 4
{host}
[[fleet.sharing]]
name = "pool"
{pool}
[[flavors]]
name = "f"
vcpus = 1
memory_mb = 512
[[designs]]
name = "sc"
design = "scheduler-claims"
"""


def _load(tmp_path, host="", pool=""):
    path = tmp_path / "s.toml"
    path.write_text(POOLED.format(host=host, pool=pool))
    return scenario.load(path)


@pytest.mark.parametrize("host, pool, where", [
    ("shared_disk = true", 'resources = { DISK_GB = 10 }', "fleet.sharing[0].resources: DISK_GB"),
    ("shared_disk = true", 'resources = { "ipv4" = 10 }', "fleet.sharing[0].resources: 'ipv4'"),
    ("shared_disk = true", "disk_gb = 0", "fleet.sharing[0]: shares nothing"),
    ("", 'resources = { IPV4_ADDRESS = 10 }', "fleet.sharing[0].shared_by"),
    ("shared_disk = true", 'resources = { IPV4_ADDRESS = 10 }',
     "fleet.hosts[0].shared_disk: the fleet has no sharing provider of disk"),
    ("", 'shared_by = "rack"', "fleet.sharing[0].shared_by"),
    ("", 'shared_by = "cell"\ncolour = 1', "fleet.sharing[0]"),
    ("", 'shared_by = "cell"\nresources = { IPV4_ADDRESS = 0 }', "fleet.sharing[0].resources"),
    ("", 'shared_by = "cell"\n[[fleet.sharing]]\nname = "pool"\nshared_by = "cell"', "fleet.sharing: names"),
])
def test_bad_sharing_pools_name_the_key(tmp_path, host, pool, where):
    with pytest.raises(scenario.ScenarioError) as err:
        _load(tmp_path, host, pool)
    assert where in str(err.value)


def test_a_bad_pool_exits_2_on_the_command_line(tmp_path, capsys):
    from billeting.cli import main

    path = tmp_path / "s.toml"
    path.write_text(POOLED.format(host="", pool='resources = { DISK_GB = 10 }\nshared_by = "cell"'))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "fleet.sharing[0].resources: DISK_GB" in err and "Traceback" not in err


def test_pool_defaults(tmp_path):
    disk = _load(tmp_path, "shared_disk = true").fleet.sharing[0]
    assert disk.effective_disk_gb == 100_000 and disk.shared_by == "shared-disk"
    ips = _load(tmp_path, "", 'shared_by = "cell"\nresources = { IPV4_ADDRESS = 9, CUSTOM_BW = 5 }').fleet.sharing[0]
    assert ips.effective_disk_gb == 0 and ips.resources == {"IPV4_ADDRESS": 9, "CUSTOM_BW": 5}


def test_the_documented_pool_example_loads(tmp_path):
    """The example in docs/operator/simulation.md, inside a scenario of two cells."""
    import re

    doc = Path(__file__).parents[2].joinpath("docs", "operator", "simulation.md").read_text()
    block = re.search(r"```toml\n(\[\[fleet\.sharing\]\].*?)```", doc, re.S).group(1)
    pools, _, rest = block.partition("[[flavors]]")
    flavor, _, arrivals = rest.partition("[arrivals]")
    text = ('name = "doc"\n[fleet]\ncells = 2\n[[fleet.hosts]]\nname = "h"\ncount = 4\n' + pools
            + "[[flavors]]" + flavor + "[arrivals]" + arrivals
            + '[[designs]]\nname = "sc"\ndesign = "scheduler-claims"\n')
    path = tmp_path / "doc.toml"
    path.write_text(text)
    s = scenario.load(path)
    assert [sp.resources for sp in s.fleet.sharing] == [{"IPV4_ADDRESS": 500}] * 2
    assert s.arrivals.prefill == 0.6 and s.flavors[0].extra_specs == {"resources:IPV4_ADDRESS": "1"}


def test_the_checker_reading_only_the_traits_it_checks_sees_the_same(filled, tmp_path):
    s, fleet, _, full = filled
    engine = runner._sqlite_engine(tmp_path / "again.db")
    client = InProcessPlacementClient(engine)
    try:
        again = fleet_mod.build(client, s)
        prefill_mod.prefill(client, s, again)
        ours = {p for h in again.hosts for p in h.providers} | again.sharing
        some = checker.read_state(client, only=ours, traits={"CUSTOM_PHYSNET_DATA"})
    finally:
        engine.dispose()
    assert some.consumers == full.consumers
    for uuid, p in full.providers.items():
        assert some.providers[uuid].traits == p.traits & {"CUSTOM_PHYSNET_DATA", checker.SHARING}, p.name
    assert any(p.traits == {checker.SHARING} for p in some.providers.values())
    assert any("CUSTOM_PHYSNET_DATA" in p.traits for p in some.providers.values())


def test_the_running_fill_totals_match_a_recount(tmp_path):
    """The engine keeps fill-over-time totals as instances come and go;
    at the end they must equal a count from scratch."""
    from billeting.sim import workload
    from billeting.sim.engine import Run

    s = scenario.load(EVERY_KIND)
    engine = runner._sqlite_engine(tmp_path / "run.db")
    try:
        client = InProcessPlacementClient(engine)
        fleet = fleet_mod.build(client, s)
        placed = prefill_mod.prefill(client, s, fleet)
        sim = Run(s, s.designs[0], client, fleet, placed, workload.generate(s))
        sim.run()
    finally:
        engine.dispose()
    states = {i.state for i in sim.instances.values()}
    assert {"deleted", "active"} <= states          # instances came and went
    _, active, in_use, vcpu, ram = sim.fill[-1]
    assert active == len(placed) + sum(1 for i in sim.instances.values() if i.state in ("active", "building"))
    assert in_use == sum(1 for n in sim.consumers_on.values() if n > 0)
    assert vcpu == sum(u.get("VCPU", 0) for u in sim.usage.values()) / sim.capacity_vcpu
    assert ram == sum(u.get("MEMORY_MB", 0) for u in sim.usage.values()) / sim.capacity_ram
    assert len({f[1] for f in sim.fill}) > 2        # and they moved on the way


def test_the_in_process_snapshot_reads_what_the_api_reads(tmp_path):
    """An in-process run's checker reads Placement's tables (sim/snapshot.py)
    instead of two API calls per provider: on a filled fleet of every kind
    (nested trees, pools, traits), with a provider outside ``only``, both
    reads must give the same state."""
    from billeting.sim import snapshot

    s = scenario.load(EVERY_KIND)
    engine = runner._sqlite_engine(tmp_path / "snap.db")
    client = InProcessPlacementClient(engine)
    try:
        fleet = fleet_mod.build(client, s)
        prefill_mod.prefill(client, s, fleet)
        stranger = client.create_provider("not-the-fleets")
        client.put_inventories(stranger.uuid, stranger.generation, {"VCPU": Inventory(total=4)})
        ours = {p for h in fleet.hosts for p in h.providers} | fleet.sharing
        for only, traits in ((ours, None), (ours, {"CUSTOM_PHYSNET_DATA"}), (None, None)):
            api = checker.read_state(client, only=only, traits=traits)
            assert snapshot.read_state(engine, only=only, traits=traits) == api
        assert api.consumers and stranger.uuid in api.providers
        assert any(p.root != p.uuid for p in api.providers.values())  # nested trees were compared
    finally:
        engine.dispose()
