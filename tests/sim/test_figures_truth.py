"""The figures of built runs whose true values follow from the scenario:
every build fails, or every build on one bad host fails, so each design's
attempts and retries per instance are known before the run."""
from collections import Counter

import pytest

from billeting.sim import runner, scenario, workload
from billeting.sim.figures import FIGURES, winners
from billeting.sim.narrative import explain
from billeting.sim.report_html import _figures

FLEET = """
name = "truth"
seed = 3
candidates_limit = 50
[fleet]
cells = 1
hosts_per_rack = 2
[[fleet.hosts]]
name = "h"
count = {hosts}
vcpus = 16
memory_mb = 32768
disk_gb = 1000
[[flavors]]
name = "fits"
vcpus = 1
memory_mb = 512
root_gb = 1
weight = 1
{extra_flavors}
[arrivals]
requests = {requests}
rate_per_s = 0.05
[lifetimes]
distribution = "forever"
[failures]
build_failure_pct = {pct}
bad_hosts = {bad}
[timing]
build_s = 5
"""

# Bigger than any host: the scheduler finds no host, no build is tried.
HUGE = """
[[flavors]]
name = "huge"
vcpus = 64
memory_mb = 512
root_gb = 1
weight = 3
"""

EVERY_BUILD_FAILS_DESIGNS = """
[[designs]]
name = "legacy"
design = "legacy"
max_attempts = 3
[[designs]]
name = "conductor-claims"
design = "conductor-claims"
alternates = 1
[[designs]]
name = "scheduler-claims"
design = "scheduler-claims"
alternates = 1
"""


def _load(tmp_path, designs: str, **kw) -> scenario.Scenario:
    path = tmp_path / "truth.toml"
    path.write_text(FLEET.format(**kw) + designs)
    return scenario.load(path)


@pytest.fixture(scope="module")
def every_build_fails(tmp_path_factory):
    s = _load(tmp_path_factory.mktemp("fails"), EVERY_BUILD_FAILS_DESIGNS, hosts=4, requests=24,
              pct=100.0, bad=0, extra_flavors=HUGE)
    flavors = Counter(a.flavor.name for a in workload.generate(s) for _ in range(a.count))
    return s, runner.run(s), flavors["fits"], flavors["huge"]


def test_attempts_and_retries_count_what_was_tried(every_build_fails):
    _, run, fits, huge = every_build_fails
    assert fits and huge > fits          # enough never-built ones to sink the old mean below 1
    # legacy: 3 attempts (max_attempts); the cell designs: the host and 1 alternate.
    for d, attempts in zip(run.designs, (3, 2, 2)):
        assert d.succeeded == 0 and d.errored == fits + huge, d.name
        assert d.never_built == huge, d.name
        assert d.attempts_per_build.count == fits, d.name
        assert d.attempts_per_build.mean == attempts, d.name
        assert d.retries == (attempts - 1) * fits, d.name


def test_retries_of_failed_builds_are_reported(every_build_fails):
    _, run, fits, _ = every_build_fails
    retries = {t["name"]: t["y"] for t in _figures(run)["retries"]["data"]}
    assert retries["retries (build attempts after the first)"] == [2 * fits, fits, fits]
    text = explain(run)
    assert "needed no retries" not in text
    assert f"retried {fits:,} build attempts on the alternates" in text
    assert f"made {fits:,} extra attempts" in text


def test_giving_up_does_not_win_the_cost_rows(tmp_path):
    # One host of two fails every build: with no alternate an instance that
    # lands there ends in ERROR after 1 attempt; with 1 it is built on the
    # other host after 2.
    s = _load(tmp_path, """
[[designs]]
name = "gives-up"
design = "scheduler-claims"
alternates = 0
[[designs]]
name = "retries"
design = "scheduler-claims"
alternates = 1
""", hosts=2, requests=12, pct=0.0, bad=1, extra_flavors="")
    run = runner.run(s)
    gives_up, retries = run.designs
    assert retries.success_rate == 1.0 and gives_up.errored > 0
    assert gives_up.attempts_per_build.mean == 1.0 and gives_up.retries == 0
    assert retries.retries == gives_up.errored     # every instance on the bad host moved once
    assert retries.attempts_per_build.mean > 1.0
    by_key = {f.key: f for f in FIGURES}
    for key in ("attempts", "retries", "claim_conflicts", "placement_per_build", "stranded"):
        assert 0 not in winners(by_key[key], run.designs), key
    assert winners(by_key["success_pct"], run.designs) == {1}
