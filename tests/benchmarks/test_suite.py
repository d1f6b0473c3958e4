"""benchmarks/run: the tables BENCHMARKS.md is made of, and one real run."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _suite():
    spec = importlib.util.spec_from_file_location("bench_suite", REPO / "benchmarks" / "suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_suite"] = module
    spec.loader.exec_module(module)
    return module


suite = _suite()


def test_goals_judge_absolute_values_and_ratios():
    assert suite.Goal("≤ 100", at_most=100).met(99.0, None) is True
    assert suite.Goal("≤ 100", at_most=100).met(101.0, None) is False
    twice = suite.Goal("≥ 2×", ratio_at_least=2.0)
    assert twice.met(260.0, 129.0) is True
    assert twice.met(200.0, 129.0) is False
    assert twice.met(200.0, None) is None  # no reference measured: no verdict
    flat = suite.Goal("±25 %", ratio_at_least=0.75, ratio_at_most=1.25)
    assert flat.met(1.79, 1.45) is True
    assert flat.met(1.9, 1.45) is False


def test_a_table_states_median_runs_reference_ratio_and_verdict():
    rows = suite.Figure("rows read per placed instance", "rows", suite.Goal("≤ 100", at_most=100),
                        runs=[90.0, 80.0, 120.0], reference=[4400.0, 4600.0, 4300.0])
    rate = suite.Figure("instances/s", "instances/s", suite.Goal("≥ 2× reference", ratio_at_least=2.0),
                        runs=[261.0, 265.0, 221.0], reference=[145.0, 140.0, 150.0])
    text = suite.render(suite.Table("scheduler", "Scheduler", "set-up.", "reference", [rows, rate]),
                        "2026-12-01 20:00 UTC", "2 cores")
    lines = text.splitlines()
    assert lines[0] == "### Scheduler"
    assert "`benchmarks/run scheduler` — 2026-12-01 20:00 UTC, 2 cores. set-up." in text
    row = next(line for line in lines if line.startswith("| rows read"))
    assert "| 90.0 rows (90.0, 80.0, 120) |" in row
    assert "4,400 rows (4,400, 4,600, 4,300)" in row
    assert row.endswith("| 0.02× | **yes** |")
    row = next(line for line in lines if line.startswith("| instances/s"))
    assert row.endswith("| 1.80× | **no** |")  # 261 / 145 = 1.8 < 2


def test_the_fleet_template_places_a_bounded_share_of_its_room():
    """The template places instances so that its copies have planner
    statistics of a used allocations table; a tenth of the room, at most
    2,000, so that a small fleet keeps room for the runs."""
    assert suite.placed_in_template(30) == 96
    assert suite.placed_in_template(5000) == 2000
    assert suite.placed_in_template(1) == 3


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "benchmarks" / "run"), *args], capture_output=True, text=True, timeout=900)


def test_list_names_every_target_and_unknown_ones_are_refused():
    listed = _run("--list")
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(suite.TARGETS)
    refused = _run("nonsense")
    assert refused.returncode == 2
    assert "unknown target nonsense" in refused.stderr
    assert _run("scheduler", "--runs", "0").returncode == 2


@pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB") != "postgresql", reason="measures PostgreSQL")
def test_a_real_run_prints_a_table_from_measured_figures(tmp_path):
    prefix = f"benchtest_{uuid.uuid4().hex[:8]}"
    out = tmp_path / "runs.json"
    try:
        done = _run("scheduler-cpu", "--runs", "1", "--hosts", "30", "--seconds", "1",
                    "--db-prefix", prefix, "--json", str(out))
    finally:
        suite.Postgres(suite.DEFAULT_PG, prefix).drop_all()
    assert done.returncode == 0, done.stderr[-3000:]
    # the template placed a tenth of the 30 hosts' room before it was copied
    assert "placing 96 instances" in done.stderr and "verify: 0 overcommitted" in done.stderr
    assert "### Scheduler: database work per decision as clients are added" in done.stdout
    import json

    figures = json.loads(out.read_text())["tables"][0]["figures"]
    assert [len(f["runs"]) for f in figures] == [1] * 8
    assert all(f["runs"][0] > 0 for f in figures)  # PostgreSQL did some work per instance
    cpu_one, _, pages_one, _, price_one, *_ = (f["runs"][0] for f in figures)
    # the price of a page is the CPU divided by the pages touched, per run
    assert price_one == pytest.approx(1000 * cpu_one / pages_one)
    assert "buffer pages touched per placed instance, 8 clients" in done.stdout
