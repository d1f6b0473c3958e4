"""Each design on a tiny fleet, against this run's database; reproducibility."""
import msgspec
import pytest

from billeting.sim import results, runner, scenario

TINY = """
name = "tiny"
seed = {seed}
candidates_limit = 50
[fleet]
cells = 2
hosts_per_rack = 2
racks_per_row = 2
rows_per_room = 2
[[fleet.hosts]]
name = "h"
count = 16
vcpus = 16
memory_mb = 32768
disk_gb = 1000
[[flavors]]
name = "small"
vcpus = 1
memory_mb = 1024
root_gb = 10
weight = 3
[[flavors]]
name = "pair"
vcpus = 2
memory_mb = 2048
root_gb = 10
instances = 2
[[groups]]
name = "ha"
policy = "anti-affinity"
scope = "rack"
size = 2
flavor = "small"
weight = 1
[arrivals]
requests = {requests}
rate_per_s = 1.0
max_in_flight = 50
prefill = 0.5
prefill_spread = 0.2
[lifetimes]
mean_s = 30
[failures]
build_failure_pct = {pct}
[timing]
build_s = 10
[[designs]]
name = "legacy"
design = "legacy"
[[designs]]
name = "conductor-claims"
design = "conductor-claims"
[[designs]]
name = "scheduler-claims"
design = "scheduler-claims"
alternates = 2
"""


def load(tmp_path, *, seed=5, requests=150, pct=5.0):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.format(seed=seed, requests=requests, pct=pct))
    return scenario.load(path)


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    return runner.run(load(tmp_path_factory.mktemp("tiny"), requests=200))


def test_every_design_places_legally(outcome):
    assert [d.name for d in outcome.designs] == ["legacy", "conductor-claims", "scheduler-claims"]
    for d in outcome.designs:
        assert d.violations == [], d.name
        assert d.succeeded + d.errored == d.requested
        assert d.placement_requests > 0 and d.scheduler_latency_ms.count > 0
        assert d.placements and d.hosts and d.fill


def test_legacy_reschedules_by_upcalls_and_the_cell_designs_never_do(outcome):
    legacy, conductor, scheduler = outcome.designs
    assert legacy.upcalls > 0
    assert conductor.upcalls == 0 and scheduler.upcalls == 0
    assert max(d.attempts_per_build.max for d in outcome.designs) > 1   # failures were retried


def test_scheduler_claims_with_two_alternates_survives_five_percent_failures(outcome):
    scheduler = outcome.designs[2]
    assert scheduler.success_rate >= 0.999, scheduler.error_reasons


def _without_wall_clock(run: results.RunResult) -> dict:
    data = msgspec.to_builtins(run)
    data.pop("started_at")
    for d in data["designs"]:
        d.pop("wall_s")
        d.pop("scheduler_latency_ms")
    return data


def test_same_seed_same_result(tmp_path):
    s = scenario.select_designs(load(tmp_path, requests=80), ["scheduler-claims", "legacy"])
    first, second = runner.run(s), runner.run(s)
    assert _without_wall_clock(first) == _without_wall_clock(second)
    other = runner.run(msgspec.structs.replace(s, seed=6))
    assert _without_wall_clock(other) != _without_wall_clock(first)


def test_runs_against_the_test_database(tmp_path, placement):
    """Through a caller's client on this run's database (any backend)."""
    s = scenario.select_designs(load(tmp_path, requests=40), ["scheduler-claims"])
    run = runner.run(s, client=placement)
    d = run.designs[0]
    assert d.violations == [] and d.succeeded > 0 and d.upcalls == 0
