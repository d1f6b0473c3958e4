"""A compute that fails N builds in a row disables itself: its service record
says why, its root provider carries COMPUTE_STATUS_DISABLED (so Placement's
query leaves it out at once), and an operator's enable or a passing health
check brings it back with a fresh count. Real computes, conductor and
scheduler in one process."""
from __future__ import annotations

from billeting.cells import services
from billeting.cells import instances as inst
from billeting.cells.rpc import ComputeAPI
from billeting.compute.build_health import REASON_PREFIX, auto_disabled_reason
from billeting.compute.driver import node_uuid
from billeting.compute.fake import FakeConfig
from billeting.compute.settings import ComputeSettings
from billeting.compute.traits import DISABLED
from billeting.conductor.cell import ConductorSettings
from billeting.scheduler import Scheduler
from billeting.scheduler.settings import SchedulerSettings

from tests.cells.test_build_flow import BIG, MEDIUM, settled
from tests.support.wait import wait_for


def traits(deployment, host: str) -> set[str]:
    return set(deployment.placement.get_traits(node_uuid(host)).traits)


def service(deployment, host: str) -> services.ServiceRecord:
    return services.get(deployment.cells["cell1"].engine, host)


def threshold(n: int, **kw) -> ComputeSettings:
    return ComputeSettings(consecutive_build_service_disable_threshold=n, **kw)


def without_failure_weigher(deployment) -> None:
    """Keep choosing the failing host first (the build-failure weigher would
    rank it last after one failure), so the test controls its failures."""
    settings = SchedulerSettings().with_multipliers(build_failure_weight_multiplier=0.0)
    deployment.scheduler = Scheduler(deployment.placement, deployment.catalog, deployment.directory, settings)


def test_the_failure_that_reaches_the_threshold_disables_the_compute_and_placement_leaves_it_out(deployment):
    without_failure_weigher(deployment)
    bad = deployment.compute("bad", config=FakeConfig(**BIG, failure_rate=1.0), settings=threshold(2))
    deployment.compute("good", config=FakeConfig(**MEDIUM))
    deployment.conductor()
    first = settled(deployment, deployment.boot())
    assert (first.vm_state, first.host, [h.host for h in first.hosts_tried]) == (
        inst.VmState.ACTIVE, "good", ["bad", "good"])
    assert bad.health.failures == 1 and not service(deployment, "bad").disabled and DISABLED not in traits(
        deployment, "bad")

    second = settled(deployment, deployment.boot())
    assert [h.host for h in second.hosts_tried] == ["bad", "good"]
    record = wait_for(lambda: (r := service(deployment, "bad")).disabled and r, what="bad to disable itself")
    assert record.disabled_reason == auto_disabled_reason(2)
    # (the record is written first, then Placement, on the compute's build thread)
    wait_for(lambda: DISABLED in traits(deployment, "bad"), what="the disabled trait")
    # Not a candidate at all any more, not even as an alternate.
    line = deployment.schedule(alternates=2)[0]
    assert [s.service_host for s in line] == ["good"]


def test_an_operator_enable_clears_the_trait_and_the_count(deployment):
    bad = deployment.compute("bad", config=FakeConfig(**BIG, failure_rate=1.0), settings=threshold(1))
    deployment.compute("good", config=FakeConfig(**MEDIUM))
    deployment.conductor()
    settled(deployment, deployment.boot())
    wait_for(lambda: DISABLED in traits(deployment, "bad"), what="the disabled trait")
    assert bad.health.failures == 1
    # What PUT /os-services does: the record, then a push to the compute.
    engine = deployment.cells["cell1"].engine
    services.set_disabled(engine, "bad", False)
    ComputeAPI(deployment.cells["cell1"].bus).refresh_service("bad")
    wait_for(lambda: DISABLED not in traits(deployment, "bad"), what="the trait to go")
    assert bad.health.failures == 0
    record = service(deployment, "bad")
    assert (record.disabled, record.disabled_reason) == (False, None)
    assert {s.service_host for s in deployment.schedule(alternates=1)[0]} == {"bad", "good"}  # a candidate again


def test_a_successful_build_resets_the_count(deployment):
    solo = deployment.compute("solo", config=FakeConfig(**BIG, failure_rate=1.0), settings=threshold(2))
    deployment.conductor()
    assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ERROR
    assert solo.health.failures == 1
    solo.driver.set_failure_rate(0.0)
    assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ACTIVE
    assert solo.health.failures == 0
    solo.driver.set_failure_rate(1.0)
    assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ERROR
    assert solo.health.failures == 1 and not service(deployment, "solo").disabled
    assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ERROR
    wait_for(lambda: service(deployment, "solo").disabled, what="two failures in a row to disable it")


def test_threshold_zero_never_disables_and_aborted_builds_do_not_count(deployment):
    never = deployment.compute("never", config=FakeConfig(**BIG, failure_rate=1.0), settings=threshold(0))
    deployment.conductor()
    for _ in range(3):
        assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ERROR
    assert never.health.failures == 3 and not service(deployment, "never").disabled
    assert DISABLED not in traits(deployment, "never")
    never.driver.config = FakeConfig(**BIG, failure_rate=1.0, abort_builds=True)
    never.health.threshold = 1
    never.health.succeeded()
    assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ERROR
    assert never.health.failures == 0 and not service(deployment, "never").disabled


def test_an_operator_disable_is_never_overwritten_nor_lifted_by_the_health_check(deployment):
    m = deployment.compute("maint", config=FakeConfig(**BIG, failure_rate=1.0), settings=threshold(1))
    engine = deployment.cells["cell1"].engine
    services.set_disabled(engine, "maint", True, reason="maintenance window")
    m.refresh_service()
    assert not m.health.failed().disabled
    assert service(deployment, "maint").disabled_reason == "maintenance window"
    m.driver.set_failure_rate(0.0)
    assert m.health_check() is False
    assert service(deployment, "maint").disabled_reason == "maintenance window"


def test_a_passing_health_check_enables_a_compute_that_disabled_itself(deployment):
    bad = deployment.compute("bad", config=FakeConfig(**BIG, failure_rate=1.0), settings=threshold(1))
    deployment.conductor()
    settled(deployment, deployment.boot())
    wait_for(lambda: DISABLED in traits(deployment, "bad"), what="bad to disable itself")
    assert service(deployment, "bad").disabled_reason.startswith(REASON_PREFIX)
    assert bad.health_check() is False            # still broken: the trial build fails
    assert DISABLED in traits(deployment, "bad")
    bad.driver.set_failure_rate(0.0)              # repaired
    assert bad.health_check() is True
    record = service(deployment, "bad")
    assert (record.disabled, record.disabled_reason) == (False, None)
    assert DISABLED not in traits(deployment, "bad") and bad.health.failures == 0
    assert settled(deployment, deployment.boot()).vm_state is inst.VmState.ACTIVE


def test_a_negative_threshold_is_refused():
    import pytest

    with pytest.raises(ValueError, match="consecutive_build_service_disable_threshold"):
        threshold(-1).check()


def _two_failing_then_good(deployment, conductor_settings):
    """flaky > bad > good by RAM; flaky and bad fail every build."""
    without_failure_weigher(deployment)
    deployment.compute("flaky", config=FakeConfig(vcpus=16, memory_mb=131072, disk_gb=500, failure_rate=1.0))
    deployment.compute("bad", config=FakeConfig(**BIG, failure_rate=1.0))
    deployment.compute("good", config=FakeConfig(**MEDIUM))
    return deployment.conductor(settings=conductor_settings)


def test_the_cell_conductor_tries_hosts_it_just_saw_fail_last(deployment):
    conductor = _two_failing_then_good(deployment, ConductorSettings())
    first = settled(deployment, deployment.boot())
    assert [h.host for h in first.hosts_tried] == ["flaky", "bad", "good"]
    assert conductor.recent_failures.hosts() == {"flaky", "bad"}
    second = settled(deployment, deployment.boot())
    # Its alternates were [bad, good]: bad failed a moment ago, so good comes first.
    assert (second.vm_state, [h.host for h in second.hosts_tried]) == (inst.VmState.ACTIVE, ["flaky", "good"])
    assert second.alternates and second.alternates[0].service_host == "bad"   # kept as a last resort


def test_without_the_memory_the_walk_follows_the_scheduler_s_order(deployment):
    _two_failing_then_good(deployment, ConductorSettings(recent_failure_window_s=0))
    settled(deployment, deployment.boot())
    second = settled(deployment, deployment.boot())
    assert [h.host for h in second.hosts_tried] == ["flaky", "bad", "good"]
