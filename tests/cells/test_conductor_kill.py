"""A cell conductor SIGKILLed between claiming an alternate in Placement and
casting the build to it (real processes, as in test_processes.py) leaks no
claim: the reschedule message was not acknowledged, so the conductor that
starts next gets it again, finds the alternate already claimed, adopts that
claim and builds there.

The window is hit deterministically: the conductor is stopped (SIGSTOP)
before the build fails, so its reschedule waits; the test then holds the
instance's row (a no-op UPDATE in an open transaction) and lets the
conductor go on: it claims the alternate and blocks recording attempt 2.
The claim is seen in Placement, the record is checked to be still at
attempt 1 (nothing was cast), and the conductor is killed."""
from __future__ import annotations

import signal
import uuid as uuidlib

import pytest
from sqlalchemy import update

from billeting.cells import handoff
from billeting.cells import instances as inst
from billeting.cells import tables as ct
from billeting.cells.hosts import host_reports
from billeting.cells.messages import InstanceSpec, RequestSummary
from billeting.cli import main
from billeting.messaging import Bus
from billeting.common.db.engine import make_engine
from billeting.placement_client import http_client
from billeting.scheduler import Scheduler
from billeting.scheduler.catalog import PlacementHostCatalog
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler.nova import request_from_nova

from tests.cells.conftest import PROJECT, SMALL, USER
from tests.cells.test_processes import Proc
from tests.concurrency.serve import running_server
from tests.support.wait import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("restore_logging")]


def test_a_conductor_killed_after_claiming_an_alternate_leaks_no_claim(engine, db_url, cell_db,
                                                                       amqp_vhost_factory, capsys):
    bus_url = amqp_vhost_factory()
    cell_engine = make_engine(cell_db)
    procs: list[Proc] = []
    with running_server(db_url, workers=1) as server:
        common = ("--cell", "cell1", "--cell-db", cell_db, "--transport-url", bus_url, "--placement-url", server.url)
        # Sweeps stay out of the way: only the redelivered message recovers.
        conductor_args = ("conductor", "--sweep-interval", "600", "--reschedule-timeout", "600", *common)
        holder = None
        try:
            # Every build on "big" (the scheduler's first choice) fails.
            big = Proc("big", "compute", "--host", "big", "--memory-mb", "65536", "--vcpus", "16", "--disk-gb",
                       "500", "--build-time", "0.2", "--failure-rate", "1", "--seed", "1",
                       "--report-interval", "0.5", *common).start()
            others = Proc("others", "compute", "--host", "medium", "--memory-mb", "32768", "--host", "little",
                          "--memory-mb", "32768", "--vcpus", "16", "--disk-gb", "500", "--report-interval", "0.5",
                          *common).start()
            conductor = Proc("conductor", *conductor_args).start()
            procs.extend((big, others, conductor))
            big.wait_for_line("compute big serving")
            others.wait_for_line("compute host(s) of cell cell1 running")
            conductor.wait_for_line("serving cell cell1")

            client = http_client(server.url)
            catalog = PlacementHostCatalog(client, MemoryDirectory(), refresh_s=0.0,
                                           reports=lambda: host_reports(cell_engine, cell="cell1"))
            scheduler = Scheduler(client, catalog, MemoryDirectory())
            uuid = str(uuidlib.uuid4())
            line = scheduler.select_destinations(request_from_nova(
                SMALL, instance_uuids=[uuid], project_id=PROJECT, user_id=USER), alternates=2)[0]
            assert line[0].service_host == "big"
            alternate = line[1].allocation_request.as_resources()

            conductor.process.send_signal(signal.SIGSTOP)
            api_bus = Bus(bus_url)
            try:
                handoff.start_build(cell_engine, api_bus, instance=InstanceSpec(uuid=uuid, flavor=SMALL),
                                    request=RequestSummary(project_id=PROJECT, user_id=USER), selections=line)
            finally:
                api_bus.close()
            # The build failed on big, which un-claimed and asked the (stopped) conductor to reschedule.
            wait_for(lambda: inst.get(cell_engine, uuid).task_state is inst.TaskState.RESCHEDULING
                     and not client.get_allocations(uuid).as_resources(), timeout=15, what="the failed build")

            # Hold the instance's row so that recording attempt 2 (before the cast) blocks.
            holder = cell_engine.connect()
            held = holder.begin()
            holder.execute(update(ct.instances).where(ct.instances.c.uuid == uuid)
                           .values(updated_at=ct.instances.c.updated_at))
            conductor.process.send_signal(signal.SIGCONT)
            wait_for(lambda: client.get_allocations(uuid).as_resources() == alternate, timeout=15,
                     what="the conductor's claim of the alternate")
            conductor.process.send_signal(signal.SIGSTOP)
            record = inst.get(cell_engine, uuid)
            assert (record.task_state, record.num_attempts) == (inst.TaskState.RESCHEDULING, 1)
            assert "rescheduled to" not in conductor.output()
            conductor.stop(signal.SIGKILL)
            assert conductor.process.returncode == -signal.SIGKILL
            held.rollback()
            holder.close()
            holder = None
            assert uuid not in others.output()  # no build was ever cast to the alternate

            again = Proc("conductor-again", *conductor_args).start()
            procs.append(again)
            record = wait_for(lambda: (r := inst.get(cell_engine, uuid)).vm_state is not inst.VmState.BUILDING
                              and r, timeout=20, what="the build to settle")
            assert (record.vm_state, record.num_attempts) == (inst.VmState.ACTIVE, 2)
            assert record.host == line[1].service_host
            assert [h.host for h in record.hosts_tried] == ["big", line[1].service_host]
            # One allocation set — the alternate's, adopted — and nothing anywhere else.
            assert client.get_allocations(uuid).as_resources() == alternate
            assert main(["audit", "--cell", f"cell1={cell_db}", "--placement-url", server.url]) == 0
            assert "0 orphaned, 0 unknown, 0 removed" in capsys.readouterr().out

            for proc in procs:
                if proc.process.poll() is None:
                    assert proc.stop() == 0, proc.output()
        finally:
            if holder is not None:
                holder.close()
            for proc in procs:
                if proc.process is not None and proc.process.poll() is None:
                    proc.process.send_signal(signal.SIGCONT)
                proc.close()
            cell_engine.dispose()
