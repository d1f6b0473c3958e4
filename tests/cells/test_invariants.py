"""No allocation is ever leaked: after a run of builds that fail, reschedule,
run out of hosts, get deleted mid-build or never find a host, Placement's
usages are exactly the flavors of the active instances, every instance is
active, in ERROR with a fault, or deleted, and the audit finds nothing."""
from __future__ import annotations

import random
from collections import Counter

from billeting.cells import audit, handoff
from billeting.cells import instances as inst
from billeting.cells.messages import InstanceSpec, RequestSummary
from billeting.compute.fake import FakeConfig
from billeting.scheduler import NoValidHost
from billeting.scheduler.nova import Flavor

from tests.cells.conftest import PROJECT, USER
from tests.support.wait import wait_for

FLAVORS = [Flavor(vcpus=v, memory_mb=m, root_gb=d) for v, m, d in ((1, 512, 5), (2, 2048, 20), (4, 8192, 40))]


def test_usages_equal_the_flavors_of_active_instances_after_a_turbulent_run(deployment):
    rng = random.Random(20261123)
    configs = {
        "steady-1": FakeConfig(vcpus=8, memory_mb=8192, disk_gb=200, seed=1),
        "steady-2": FakeConfig(vcpus=8, memory_mb=8192, disk_gb=200, seed=2),
        "flaky": FakeConfig(vcpus=8, memory_mb=12288, disk_gb=200, failure_rate=0.6, seed=3),
        "broken": FakeConfig(vcpus=8, memory_mb=16384, disk_gb=200, failure_rate=1.0, seed=4),
        "aborting": FakeConfig(vcpus=4, memory_mb=8192, disk_gb=100, failure_rate=0.5, abort_builds=True, seed=5),
    }
    for host, config in configs.items():
        deployment.compute(host, config=config)
    deployment.conductor()
    cell0 = deployment.cell("cell0")
    wiring = deployment.cells["cell1"]
    booted, buried = [], []
    # Whether the random flavors run out of room depends on how fast the
    # computes fail and free their builds; the last request never fits
    # (more memory than any host has), so "never found a host" is always in the run.
    too_big = Flavor(vcpus=1, memory_mb=65536, root_gb=5)
    for n in range(41):
        flavor = rng.choice(FLAVORS) if n < 40 else too_big
        try:
            uuid = deployment.boot(flavor, name=f"vm{n}")
        except NoValidHost as exc:
            uuid = f"00000000-0000-4000-8000-{n:012d}"
            handoff.bury_in_cell0(cell0.engine, instance=InstanceSpec(uuid=uuid, flavor=flavor),
                                  request=RequestSummary(project_id=PROJECT, user_id=USER), reason=str(exc))
            buried.append(uuid)
            continue
        booted.append(uuid)
        if rng.random() < 0.2:  # deleted while it may still be building or rescheduling
            handoff.request_delete(wiring.engine, wiring.bus, uuid)

    def quiet():
        records = inst.get_many(wiring.engine, booted).values()
        return all(r.vm_state is not inst.VmState.BUILDING and r.task_state is None for r in records)

    wait_for(quiet, timeout=60, what="every build and delete to settle")
    for uuid in rng.sample(booted, 8):
        handoff.request_delete(wiring.engine, wiring.bus, uuid)
    wait_for(quiet, timeout=60, what="the deletes to settle")

    records = inst.get_many(wiring.engine, booted)
    states = Counter(r.vm_state for r in records.values())
    assert set(states) <= {inst.VmState.ACTIVE, inst.VmState.ERROR, inst.VmState.DELETED}
    assert states[inst.VmState.ACTIVE] and states[inst.VmState.ERROR] and states[inst.VmState.DELETED] and buried
    for record in records.values():
        if record.vm_state is inst.VmState.ERROR:
            assert inst.latest_fault(wiring.engine, record.uuid) is not None
            assert record.host is None
    for uuid in buried:
        assert inst.get(cell0.engine, uuid).vm_state is inst.VmState.ERROR
        assert "valid host" in inst.latest_fault(cell0.engine, uuid).message.lower()

    # Who holds what, over every compute provider of the cell.
    providers = [p for m in (s.managers[0] for s in deployment.computes.values()) for p in m.provider_uuids()]
    active = {u: r for u, r in records.items() if r.vm_state is inst.VmState.ACTIVE}
    # A compute frees a failed build's allocation just after recording the ERROR.
    held = wait_for(lambda: (h := audit.holdings(deployment.placement, providers)).keys() == active.keys() and h,
                    what="only active instances to hold allocations")
    for uuid, record in active.items():
        assert held[uuid] == record.selection.allocation_request.as_resources()
    usage = Counter()
    for rp in providers:
        for consumer, part in deployment.placement.provider_allocations(rp).allocations.items():
            usage.update(part.resources)
    expected = Counter()
    for record in active.values():
        expected.update({"VCPU": record.flavor.vcpus, "MEMORY_MB": record.flavor.memory_mb,
                         "DISK_GB": record.flavor.root_gb})
    assert usage == expected
    report = audit.audit(deployment.placement, providers, {"cell1": wiring.engine, "cell0": cell0.engine},
                         remove_unknown=True)
    assert report.findings == ()
