"""Real processes: Placement (`billeting serve`), computes (`billeting
compute`) and a cell conductor (`billeting conductor`) on a RabbitMQ vhost
of their own. A compute killed with SIGKILL in the middle of a build leaves
an instance that ends active on another host — whether the compute comes
back or stays dead — and nothing leaks (`billeting audit` finds no orphan)."""
from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid as uuidlib
from pathlib import Path

import pytest

from billeting.cells import handoff, services
from billeting.cells import instances as inst
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
from tests.concurrency.serve import clean_environ, running_server
from tests.support.wait import wait_for
from tests.support.ports import free_port
from tests.support.processes import stop_process

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("restore_logging")]


class Proc:
    def __init__(self, name: str, *args: str) -> None:
        self.name = name
        self.args = args
        self.log = Path(tempfile.mkstemp(prefix=f"billeting-{name}-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None

    def start(self) -> "Proc":
        with self.log.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "billeting.cli", *self.args], stdout=out,
                                            stderr=subprocess.STDOUT, env=clean_environ())
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_line(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.process.returncode}:\n{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not log {text!r}:\n{self.output()}")

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.process is None:
            return None
        return stop_process(self.process, sig, what=self.name, output=self.output)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.log.unlink(missing_ok=True)


@pytest.mark.parametrize("recovery", ["compute-restarts", "compute-stays-down"])
def test_a_compute_killed_mid_build_leaves_a_truthful_instance_and_no_leak(engine, db_url, cell_db,
                                                                          amqp_vhost_factory, recovery, capsys):
    bus_url = amqp_vhost_factory()
    cell_engine = make_engine(cell_db)
    procs: list[Proc] = []
    with running_server(db_url, workers=1) as server:
        common = ("--cell", "cell1", "--cell-db", cell_db, "--transport-url", bus_url, "--placement-url", server.url)
        # Heartbeats every half second; the conductor calls a compute down
        # after 3 s of silence — unless the test wants only the restart to act.
        down_after = "3" if recovery == "compute-stays-down" else "600"
        slow = ("compute", "--host", "big", "--memory-mb", "65536", "--vcpus", "16", "--disk-gb", "500",
                "--build-time", "60", "--report-interval", "0.5", *common)
        try:
            big = Proc("big", *slow).start()
            others = Proc("others", "compute", "--host", "medium", "--memory-mb", "32768", "--host", "little",
                          "--memory-mb", "32768", "--vcpus", "16", "--disk-gb", "500", "--report-interval", "0.5",
                          *common).start()
            metrics_port = free_port()
            conductor = Proc("conductor", "conductor", "--sweep-interval", "0.5", "--service-down-time", down_after,
                             "--metrics-port", str(metrics_port), *common).start()
            procs.extend((big, others, conductor))
            big.wait_for_line("compute big serving")
            others.wait_for_line("compute host(s) of cell cell1 running")
            conductor.wait_for_line("serving cell cell1")

            # The API level: schedule, record, cast.
            client = http_client(server.url)
            catalog = PlacementHostCatalog(client, MemoryDirectory(), refresh_s=0.0,
                                           reports=lambda: host_reports(cell_engine, cell="cell1"))
            scheduler = Scheduler(client, catalog, MemoryDirectory())
            uuid = str(uuidlib.uuid4())
            line = scheduler.select_destinations(request_from_nova(
                SMALL, instance_uuids=[uuid], project_id=PROJECT, user_id=USER), alternates=2)[0]
            assert line[0].service_host == "big"
            api_bus = Bus(bus_url)
            try:
                handoff.start_build(cell_engine, api_bus, instance=InstanceSpec(uuid=uuid, flavor=SMALL),
                                    request=RequestSummary(project_id=PROJECT, user_id=USER), selections=line)
            finally:
                api_bus.close()
            wait_for(lambda: inst.get(cell_engine, uuid).task_state is inst.TaskState.SPAWNING, timeout=30)

            big.stop(signal.SIGKILL)
            assert big.process.returncode == -signal.SIGKILL
            if recovery == "compute-restarts":
                big = Proc("big-again", *slow).start()
                procs.append(big)
                big.wait_for_line("compute big serving")
                assert "recovered after a restart" in big.output()

            record = wait_for(lambda: (r := inst.get(cell_engine, uuid)).vm_state is not inst.VmState.BUILDING
                              and r, timeout=60, what="the build to settle")
            assert (record.vm_state, record.num_attempts) == (inst.VmState.ACTIVE, 2)
            assert record.host == line[1].service_host
            assert [h.host for h in record.hosts_tried] == ["big", line[1].service_host]
            assert client.get_allocations(uuid).as_resources() == line[1].allocation_request.as_resources()
            assert services.node(cell_engine, line[0].compute_node_uuid).failed_builds == 1
            # The standalone conductor's own exporter counts the reschedule it cast.
            scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
            assert 'billeting_conductor_reschedules_total{cell="cell1",result="cast"} 1.0' in scraped, scraped

            # `billeting audit` (in this process: it is a one-shot command) finds nothing to remove.
            assert main(["audit", "--cell", f"cell1={cell_db}", "--placement-url", server.url]) == 0
            assert "0 orphaned, 0 unknown, 0 removed" in capsys.readouterr().out

            for proc in procs:
                if proc.process.poll() is None:
                    assert proc.stop() == 0, proc.output()
        finally:
            for proc in procs:
                proc.close()
            cell_engine.dispose()
