"""Scenario features: hosts, racks and sharing providers that go down and come
back, build times per host kind, and the refusal of keys that name nothing or
contradict each other. Runs drive the real scheduler and an in-process
Placement on a small fleet."""
from __future__ import annotations

import pytest

from billeting.cli import main
from billeting.sim import fleet as fleet_mod
from billeting.sim import outages, runner, scenario, workload
from billeting.sim import prefill as prefill_mod
from billeting.sim.engine import Run

BASE = """
name = "outages"
seed = 4
candidates_limit = 50
[fleet]
cells = 1
hosts_per_rack = 2
racks_per_row = 2
rows_per_room = 2
{sharing}
[[fleet.hosts]]
name = "h"
count = 4
vcpus = 16
memory_mb = 32768
disk_gb = 1000
{hosts}
[[flavors]]
name = "small"
vcpus = 1
memory_mb = 1024
root_gb = 10
[arrivals]
requests = {requests}
rate_per_s = 1.0
max_in_flight = 50
[lifetimes]
mean_s = 20
[failures]
build_failure_pct = 0
{failures}
[timing]
build_s = 10
build_jitter = 0
{timing}
[[designs]]
name = "sc"
design = "scheduler-claims"
alternates = 2
{design}
"""


def write(tmp_path, *, requests=40, sharing="", hosts="", failures="", timing="", design="", name="s.toml"):
    path = tmp_path / name
    path.write_text(BASE.format(requests=requests, sharing=sharing, hosts=hosts, failures=failures,
                                timing=timing, design=design))
    return path


def run_of(path) -> Run:
    """One design's run, kept whole so the test can look inside it."""
    s = scenario.load(path)
    with runner._workdir() as work:
        engine = runner._sqlite_engine(work / "p.db")
        from billeting.placement_client.inprocess import InProcessPlacementClient

        client = InProcessPlacementClient(engine)
        try:
            fleet = fleet_mod.build(client, s)
            run = Run(s, s.designs[0], client, fleet, prefill_mod.prefill(client, s, fleet), workload.generate(s))
            run.run()
            run.traits_after = {h.uuid: set(client.get_traits(h.uuid).traits) for h in fleet.hosts}
        finally:
            client.close()
            engine.dispose()
    return run


def host_uuid(run: Run, name: str) -> str:
    return next(h.uuid for h in run.fleet.hosts if h.name == name)


# --- refused --------------------------------------------------------------------------

@pytest.mark.parametrize("kw, message", [
    (dict(failures='down = [{host = "h-00001", rack = "rack0", at_s = 5}]'), "exactly one of host, rack or sharing"),
    (dict(failures='down = [{at_s = 5}]'), "exactly one of host, rack or sharing (got none)"),
    (dict(failures='down = [{host = "h-00009", at_s = 5}]'), "no host named 'h-00009'"),
    (dict(failures='down = [{host = 4, at_s = 5}]'), "an index below 4"),
    (dict(failures='down = [{rack = "rack7", at_s = 5}]'), "no rack named 'rack7' (the fleet has rack0 to rack1)"),
    (dict(failures='down = [{sharing = "nfs", at_s = 5}]'), "no sharing provider named 'nfs' (the fleet has none)"),
    (dict(failures='down = [{host = "h-00001", at_s = 50, up_at_s = 20}]'), "up_at_s: must be later than at_s"),
    (dict(failures='down = [{host = "h-00001", at_s = 10, up_at_s = 50}, {host = "h-00001", at_s = 40}]'),
     "failures.down[1]: host 'h-00001' is already down then (failures.down[0])"),
    (dict(failures='down = [{host = "h-00001", at_s = 5, node = 1}]'), "failures.down[0]"),
    (dict(timing='build_s_by_kind = {bare = 60}'), "timing.build_s_by_kind.bare: not a host kind"),
    (dict(timing='build_s_by_kind = {ironic = 60}'), "no host of the fleet is of kind 'ironic'"),
    (dict(timing="build_s_by_kind = {flat = -1}"), "timing.build_s_by_kind[...]: Expected `float` >= 0.0"),
    (dict(design="health_check_s = 60"), "health_check_s: only means something with disable_after_failures"),
    (dict(design='disable_after_failures = -1'), "designs[0].disable_after_failures"),
])
def test_unknown_or_contradictory_outage_keys_are_refused_with_exit_2(tmp_path, capsys, kw, message):
    path = write(tmp_path, **kw)
    with pytest.raises(scenario.ScenarioError) as caught:
        scenario.load(path)
    assert message in str(caught.value)
    assert main(["simulate", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-html"]) == 2
    assert message in capsys.readouterr().err


def test_a_conductor_memory_on_legacy_is_refused(tmp_path):
    path = write(tmp_path, design='recent_failure_window_s = 60')
    text = path.read_text().replace('design = "scheduler-claims"', 'design = "legacy"')
    path.write_text(text)
    with pytest.raises(scenario.ScenarioError, match="legacy walks no alternates"):
        scenario.load(path)


def test_separate_outages_of_one_host_and_the_old_index_form_load(tmp_path):
    path = write(tmp_path, failures='down = [{host = "h-00001", at_s = 10, up_at_s = 20}, '
                                    '{host = "h-00001", at_s = 30}, {host = 2, at_s = 5}, {rack = "rack1", at_s = 1}]')
    s = scenario.load(path)
    assert [d.target() for d in s.failures.down] == [("host", "h-00001"), ("host", "h-00001"), ("host", "2"),
                                                     ("rack", "rack1")]


# --- run ----------------------------------------------------------------------------

def test_a_rack_goes_down_for_good(tmp_path, monkeypatch):
    landed: dict[str, str] = {}
    real_active = Run.active

    def active(self, inst):
        landed[inst.uuid] = inst.host
        real_active(self, inst)

    monkeypatch.setattr(Run, "active", active)
    run = run_of(write(tmp_path, requests=60, failures='down = [{rack = "rack0", at_s = 0}]'))
    rack0 = {h.uuid for h in run.fleet.hosts if h.domains["rack"] == "rack0"}
    assert len(rack0) == 2 and rack0 <= run.down
    assert landed and not set(landed.values()) & rack0
    assert all(not run.catalog.records([u])[u].up for u in rack0)


def test_a_host_named_by_name_goes_down_and_comes_back(tmp_path, monkeypatch):
    landed: dict[str, tuple[str, float]] = {}
    real_active = Run.active

    def active(self, inst):
        landed[inst.uuid] = (inst.host, self.clock.now)
        real_active(self, inst)

    monkeypatch.setattr(Run, "active", active)
    run = run_of(write(tmp_path, requests=60, failures='down = [{host = "h-00001", at_s = 0, up_at_s = 30}]'))
    down = host_uuid(run, "h-00001")
    there = [t for host, t in landed.values() if host == down]
    assert there and min(there) >= 30 + 10     # a build takes 10 s: none started while it was down
    assert down not in run.down and run.catalog.records([down])[down].up


def test_builds_that_use_a_sharing_provider_fail_while_it_is_down(tmp_path, monkeypatch):
    landed: list[float] = []
    real_active = Run.active

    def active(self, inst):
        landed.append(self.clock.now)
        real_active(self, inst)

    monkeypatch.setattr(Run, "active", active)
    sharing = '[[fleet.sharing]]\nname = "nfs"\ndisk_gb = 100000'
    path = write(tmp_path, requests=40, sharing=sharing, failures='down = [{sharing = "nfs", at_s = 0, up_at_s = 60}]')
    path.write_text(path.read_text().replace("disk_gb = 1000\n", "disk_gb = 1000\nshared_disk = true\n", 1))
    run = run_of(path)
    errors = [i for i in run.instances.values() if i.state == "error"]
    assert errors, "builds in the window failed on every host"
    assert landed and min(landed) >= 60          # nothing built while the storage was down
    assert not run.sharing_down


def test_build_times_follow_the_host_kind(tmp_path, monkeypatch):
    took: dict[str, list[float]] = {"flat": [], "numa": []}
    real_active = Run.active

    def active(self, inst):
        kind = self.fleet.by_uuid[inst.host].shape.kind
        took[kind].append(self.clock.now - inst.arrival.at_s)
        real_active(self, inst)

    monkeypatch.setattr(Run, "active", active)
    numa = '[[fleet.hosts]]\nname = "n"\ncount = 4\nkind = "numa"\nvcpus = 16\nmemory_mb = 32768\ndisk_gb = 1000'
    run_of(write(tmp_path, requests=60, hosts=numa, timing="build_s_by_kind = {numa = 200}"))
    assert took["flat"] and took["numa"]
    # Build time plus a few RPC and Placement hops (well under a second).
    assert all(10 <= t < 11 for t in took["flat"]) and all(200 <= t < 201 for t in took["numa"])


def test_a_host_down_on_its_own_and_with_its_rack_is_back_when_both_are_over(tmp_path):
    s = scenario.load(write(tmp_path, failures='down = [{host = "h-00000", at_s = 0, up_at_s = 100}, '
                                                '{rack = "rack0", at_s = 10, up_at_s = 20}]'))
    with runner._workdir() as work:
        from billeting.placement_client.inprocess import InProcessPlacementClient

        engine = runner._sqlite_engine(work / "p.db")
        client = InProcessPlacementClient(engine)
        try:
            fleet = fleet_mod.build(client, s)
            run = Run(s, s.designs[0], client, fleet, {}, [])
            host, rack = outages.resolve(s.failures.down, fleet)
            alone = host.uuids[0]
            run._went_down(host, True)
            run._went_down(rack, True)
            run._went_down(rack, False)          # the rack is back, the host still down on its own
            assert alone in run.down and not run.catalog.records([alone])[alone].up
            others = set(rack.uuids) - {alone}
            assert others and not others & run.down and all(r.up for r in run.catalog.records(others).values())
            run._went_down(host, False)
            assert alone not in run.down and run.catalog.records([alone])[alone].up
        finally:
            client.close()
            engine.dispose()
