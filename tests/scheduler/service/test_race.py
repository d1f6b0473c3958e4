"""Races between real scheduler processes, on PostgreSQL and RabbitMQ.

A Placement server (2 workers) and ``billeting scheduler serve --workers 4``
(four scheduler processes consuming one RPC queue) share one PostgreSQL
database (each schema with its own migration history). 200 single-instance
requests arrive at once over RabbitMQ for a fleet with room for exactly
150: exactly 150 must be placed and 50 refused with NoValidHost, Placement
must show no host over its capacity, and the schedulers' log must show
claims that lost a race and fell back to another host.

The processes are fresh and the burst is the first thing they serve: no
HTTP probe, no warm-up call — readiness is read from RabbitMQ (the number
of consumers on the scheduler's queue), so every process meets its first
requests concurrently with the others (issue 28).
"""
from __future__ import annotations

import os
import re
import subprocess
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from billeting.messaging import Bus
from billeting.placement_client import http_client
from billeting.placement_client.model import Inventory, RequestGroup
from billeting.scheduler import NoValidHost, ScheduleRequest
from billeting.scheduler.rpc import TOPIC, SchedulerClient
from tests.concurrency.serve import running_server
from tests.conftest import _create_database
from tests.scheduler.service.procs import running_scheduler

HOSTS = 30
VCPU_PER_HOST = 5          # room for 150
REQUESTS = 200
CALLERS = 64
SCHEDULERS = 4

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB") != "postgresql",
                       reason="runs in the PostgreSQL pass (BILLETING_TEST_DB=postgresql)"),
]


def _consumers(vhost_url: str) -> int:
    vhost = vhost_url.rsplit("/", 1)[1]
    out = subprocess.run(["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "consumers"],
                         capture_output=True, text=True, timeout=60).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == TOPIC:
            return int(parts[1])
    return 0


def test_four_schedulers_race_for_150_slots(tmp_path_factory, amqp_vhost_factory):
    db = _create_database(tmp_path_factory)
    vhost = amqp_vhost_factory()
    try:
        with running_server(db.url, workers=2, args=("--auto-upgrade",)) as placement_server:
            placement = http_client(placement_server.url)
            hosts = {}
            for i in range(HOSTS):
                rp = placement.create_provider(f"race-{i:02d}", uuid=str(uuidlib.uuid4()))
                placement.put_inventories(rp.uuid, rp.generation, {"VCPU": Inventory(total=VCPU_PER_HOST),
                                                                   "MEMORY_MB": Inventory(total=65536)})
                hosts[rp.uuid] = rp.name
            with running_scheduler("--db", db.url, "--auto-upgrade", "--workers", str(SCHEDULERS),
                                   "--placement-url", placement_server.url, "--transport-url", vhost,
                                   probe=False) as sched:
                deadline = time.monotonic() + 60
                while _consumers(vhost) < SCHEDULERS and time.monotonic() < deadline:
                    assert sched.process.poll() is None, sched.log()
                    time.sleep(0.5)
                assert _consumers(vhost) == SCHEDULERS, sched.log()

                bus = Bus(vhost)
                client = SchedulerClient(bus)

                def one(_):
                    inst = str(uuidlib.uuid4())
                    request = ScheduleRequest(instance_uuids=(inst,), project_id="race", user_id="race",
                                              groups=(RequestGroup(resources={"VCPU": 1, "MEMORY_MB": 64}),))
                    try:
                        (line,) = client.select_destinations(request, alternates=1, timeout=120)
                        return inst, line[0]
                    except NoValidHost:
                        return inst, None

                try:
                    with ThreadPoolExecutor(CALLERS) as pool:
                        outcomes = list(pool.map(one, range(REQUESTS)))
                finally:
                    bus.close()
                log = sched.log()

            placed = {inst: sel for inst, sel in outcomes if sel is not None}
            refused = [inst for inst, sel in outcomes if sel is None]
            assert (len(placed), len(refused)) == (150, 50), log[-3000:]

            used_total = 0
            for uuid, name in hosts.items():
                status, usages = _usages(placement_server.url, uuid)
                assert status == 200
                assert usages.get("VCPU", 0) <= VCPU_PER_HOST, f"{name} is overcommitted: {usages}"
                used_total += usages.get("VCPU", 0)
            assert used_total == 150
            for inst, sel in placed.items():
                held = placement.get_allocations(inst).allocations
                assert set(held) == {sel.compute_node_uuid}
            for inst in refused[:10]:
                assert placement.get_allocations(inst).allocations == {}

            lost = re.findall(r"\[(\d+)\] INFO billeting\.scheduler\.core: claim for \S+ on \S+ lost", log)
            assert lost, "no claim lost a race: the schedulers did not compete"
            assert len(set(re.findall(r"\[(\d+)\] INFO billeting\.scheduler\.core", log))) >= 2
            placement.close()
    finally:
        db.drop()


def _usages(url: str, uuid: str):
    from tests.concurrency.serve import Http

    http = Http(url)
    try:
        status, body = http.request("GET", f"/resource_providers/{uuid}/usages")
    finally:
        http.close()
    return status, body.get("usages", {})
