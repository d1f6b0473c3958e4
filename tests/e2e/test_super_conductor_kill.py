"""A super conductor SIGKILLed after the scheduler claimed for its request
and before it recorded and cast the build in the cell leaks no claim: the
request was not acknowledged, so the super conductor that starts next gets
it again, frees the dead one's claim, schedules again and builds — and
Placement holds one allocation set for the server.

The window is hit deterministically: the cell's instances table is locked
(PostgreSQL EXCLUSIVE mode: reads go on, writes wait), so the super
conductor blocks recording the instance, after its claim. The claim is seen
in Placement, the cell is checked to hold no record, and the super
conductor is killed before the table is unlocked."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from billeting.cells import instances as inst

from tests.e2e.test_distributed import FLAVOR, allocations, boot, create_flavor, provider_names, server

pytestmark = pytest.mark.slow


def test_a_super_conductor_killed_after_the_claim_leaks_none(deployment_factory):
    d = deployment_factory({"cell1": ("steady",)})
    d.register()
    d.start_placement()
    (cell1,) = d.cells
    d.start_compute(cell1, "steady", build_time=0.3, failure_rate=0)  # no cell conductor: no build fails
    d.start_control_plane(schedulers=1, super_conductors=1)
    create_flavor(d)
    cell_engine = create_engine(cell1.db)
    locker = cell_engine.connect()
    try:
        held = locker.begin()
        locker.execute(text("LOCK TABLE instances IN EXCLUSIVE MODE"))
        uuid = boot(d, "killed-after-claim")
        d.wait(lambda: allocations(d, uuid), timeout=30, what="the scheduler's claim")
        assert inst.get(cell_engine, uuid) is None  # not recorded, so not cast
        d.procs["super-conductor-1"].kill()
        held.rollback()
        assert server(d, uuid)["status"] == "BUILD"

        d.start_super_conductor(1)
        shown = d.wait(lambda: (s := server(d, uuid))["status"] != "BUILD" and s, timeout=30,
                       what="the request to finish after the super conductor's restart")
        assert shown["status"] == "ACTIVE", (shown, d.logs())
        assert "redelivered" in d.procs["super-conductor-1"].output()
        names = provider_names(d)
        assert {names[rp]: r for rp, r in allocations(d, uuid).items()} == {"steady": FLAVOR}
        assert {name: u for name, u in d.usages().items() if u} == {"steady": FLAVOR}
        record = inst.get(cell_engine, uuid)
        assert (record.host, record.num_attempts) == ("steady", 1)
    finally:
        locker.close()
        cell_engine.dispose()
