"""The defences against always-failing hosts, modelled per design: computes
that disable themselves (COMPUTE_STATUS_DISABLED in the real Placement) and
a cell conductor that tries hosts it just saw fail last."""
from __future__ import annotations

from billeting.scheduler.prefilters import DISABLED_TRAIT
from tests.sim.test_outages import run_of, write

MORE_HOSTS = ('[[fleet.hosts]]\nname = "g"\ncount = 12\nvcpus = 16\nmemory_mb = 32768\ndisk_gb = 1000')


# Without the build-failure weigher the scheduler keeps offering bad hosts,
# so what each defence saves shows on a small fleet.
NO_WEIGHER = "multipliers = {build_failure_weight_multiplier = 0.0}\n"


def bad_builds(run) -> int:
    """Builds tried on always-failing hosts (each one failed and was counted)."""
    return sum(run.health.in_a_row.get(h, 0) for h in run.bad_hosts)


def scenario(tmp_path, design: str, *, pct: float = 0, bad: int = 4, requests: int = 80, name="s.toml"):
    path = write(tmp_path, requests=requests, hosts=MORE_HOSTS, failures=f"bad_hosts = {bad}", design=design,
                 name=name)
    path.write_text(path.read_text().replace("build_failure_pct = 0", f"build_failure_pct = {pct}"))
    return path


def test_a_host_that_fails_n_builds_in_a_row_disables_itself_in_placement(tmp_path):
    run = run_of(scenario(tmp_path, "disable_after_failures = 2"))
    tried = {h for h in run.bad_hosts if run.health.in_a_row.get(h, 0) >= 2}
    assert tried, "some always-failing host was tried twice"
    assert tried <= run.health.disabled and run.health.disables == len(run.health.disabled)
    for h in run.health.disabled:
        assert DISABLED_TRAIT in run.traits_after[h]
        assert not run.catalog.records([h])[h].enabled
    healthy = {h.uuid for h in run.fleet.hosts} - run.bad_hosts
    assert not any(DISABLED_TRAIT in run.traits_after[h] for h in healthy)
    # Once disabled, only builds already on their way there can still reach it.
    assert max(run.health.in_a_row[h] for h in tried) <= 2 + run.s.arrivals.max_in_flight


def test_disabling_cuts_the_builds_wasted_on_bad_hosts(tmp_path):
    plain = run_of(scenario(tmp_path, NO_WEIGHER, name="plain.toml"))
    defended = run_of(scenario(tmp_path, NO_WEIGHER + "disable_after_failures = 2", name="defended.toml"))
    assert bad_builds(defended) < bad_builds(plain)
    assert plain.health.disables == 0 and not any(DISABLED_TRAIT in t for t in plain.traits_after.values())


def test_the_health_check_enables_healthy_hosts_again_and_never_a_broken_one(tmp_path):
    # One failed build disables; random failures hit healthy hosts too.
    run = run_of(scenario(tmp_path, "disable_after_failures = 1\nhealth_check_s = 15", pct=30, bad=2))
    assert run.health.enables > 0
    assert run.bad_hosts & run.health.disabled == {h for h in run.bad_hosts if run.health.in_a_row.get(h)}
    for h in run.health.disabled:
        assert DISABLED_TRAIT in run.traits_after[h]
    back = {h.uuid for h in run.fleet.hosts} - run.health.disabled
    assert not any(DISABLED_TRAIT in run.traits_after[h] for h in back)


def test_the_conductor_memory_sends_retries_past_hosts_that_just_failed(tmp_path):
    plain = run_of(scenario(tmp_path, NO_WEIGHER, bad=6, name="plain.toml"))
    remembering = run_of(scenario(tmp_path, NO_WEIGHER + "recent_failure_window_s = 600", bad=6, name="memory.toml"))
    assert bad_builds(remembering) < bad_builds(plain)
    errors = lambda run: sum(1 for i in run.instances.values() if i.state == "error")  # noqa: E731
    assert errors(remembering) <= errors(plain)
