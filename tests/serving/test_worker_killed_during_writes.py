"""A worker of ``billeting serve --workers 2`` is SIGKILLed while clients write.

The master must start a replacement, and every change visible through the
API must be whole. Two kinds of write run meanwhile:

* allocation writers: each ``POST /allocations`` creates two new consumers
  at once, A on one provider and B on another; afterwards A and B of every
  attempt are both there or both absent, and every acknowledged one is there;
* an inventory writer: each ``PUT .../inventories`` sets three classes to one
  same total; every read of them, before each write and at the end, shows
  three equal totals.

Runs on whichever backend ``BILLETING_TEST_DB`` names.
"""
from __future__ import annotations

from http.client import HTTPException
import os
import random
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field

import orjson
import pytest

from tests.concurrency.serve import Http, running_server
from tests.serving.rawhttp import child_pids
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

ALLOCATION_WRITERS = 3
KILLS = 2
PROJECT = str(uuid.uuid4())
USER = str(uuid.uuid4())
CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")


def consumer(writer: int, attempt: int, side: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{writer}-{attempt}-{side}"))


@dataclass
class WriterLog:
    attempted: int = 0
    acknowledged: set[int] = field(default_factory=set)
    broken: int = 0  # requests cut off by the kill (outcome unknown)
    unexpected: list = field(default_factory=list)


class OneShot(Http):
    """``Http`` without its retry on a dropped connection: a request the kill
    cut off must count as cut off (its outcome unknown), not be sent again."""

    def request(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        headers = {"X-Auth-Token": self.token, "OpenStack-API-Version": f"placement {self.mv}",
                   "Accept": "application/json"}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, (orjson.loads(raw) if raw else {})


def _allocation_writer(url: str, writer: int, left: str, right: str, stop: threading.Event, log: WriterLog):
    client = OneShot(url, mv="1.27")
    while not stop.is_set():
        attempt = log.attempted
        log.attempted += 1
        body = {consumer(writer, attempt, side): {"allocations": {rp: {"resources": {"VCPU": 1}}},
                                                  "project_id": PROJECT, "user_id": USER}
                for side, rp in (("A", left), ("B", right))}
        try:
            status, doc = client.request("POST", "/allocations", body)
        except (OSError, HTTPException):
            log.broken += 1
            client.close()
            client = OneShot(url, mv="1.27")
            continue
        if status == 204:
            log.acknowledged.add(attempt)
        elif not (status == 409 and doc["errors"][0].get("code") == "placement.concurrent_update"):
            log.unexpected.append((status, doc))
    client.close()


def _totals(doc: dict) -> set[int]:
    return {doc["inventories"][rc]["total"] for rc in CLASSES} if doc["inventories"] else set()


def _inventory_writer(url: str, rp: str, stop: threading.Event, log: WriterLog, seen: list):
    client = OneShot(url)
    while not stop.is_set():
        try:
            status, doc = client.request("GET", f"/resource_providers/{rp}/inventories")
            if status != 200:
                log.unexpected.append((status, doc))
                continue
            seen.append(_totals(doc))
            log.attempted += 1
            total = log.attempted + 100
            status, doc = client.request("PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": doc["resource_provider_generation"],
                "inventories": {rc: {"total": total} for rc in CLASSES}})
        except (OSError, HTTPException):
            log.broken += 1
            client.close()
            client = OneShot(url)
            continue
        if status == 200:
            log.acknowledged.add(total)
        elif status != 409:
            log.unexpected.append((status, doc))
    client.close()


def test_a_worker_killed_mid_write_is_replaced_and_leaves_no_half_change(db_url, engine):
    with running_server(db_url, workers=2) as server:
        setup = Http(server.url)
        rps = []
        for name in ("left", "right", "inventory"):
            status, doc = setup.request("POST", "/resource_providers", {"name": name})
            assert status == 200, doc
            rps.append(doc["uuid"])
        left, right, inventory_rp = rps
        for rp in (left, right):
            status, doc = setup.request("PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1_000_000}}})
            assert status == 200, doc

        stop = threading.Event()
        logs = [WriterLog() for _ in range(ALLOCATION_WRITERS)]
        inventory_log, inventory_seen = WriterLog(), []
        crashed: list[BaseException] = []

        def guarded(target, *args):
            def run():
                try:
                    target(*args)
                except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                    crashed.append(exc)
            return threading.Thread(target=run)

        threads = [guarded(_allocation_writer, server.url, w, left, right, stop, logs[w])
                   for w in range(ALLOCATION_WRITERS)]
        threads.append(guarded(_inventory_writer, server.url, inventory_rp, stop, inventory_log, inventory_seen))
        for thread in threads:
            thread.start()
        killed = []
        try:
            workers = wait_for(lambda: (lambda now: len(now) == 2 and now)(child_pids(server.process.pid)),
                               "two workers", timeout=20)
            for _ in range(KILLS):
                time.sleep(random.uniform(0.5, 1.0))
                victim = random.choice(sorted(workers))
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
                workers = wait_for(lambda: (lambda now: len(now) == 2 and victim not in now and now)(
                    child_pids(server.process.pid)), "a replacement worker", timeout=20)
            time.sleep(0.5)  # the replacements serve writes too
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)

        assert crashed == []
        for log in (*logs, inventory_log):
            assert log.unexpected == [], log.unexpected
        assert all(log.acknowledged for log in logs) and inventory_log.acknowledged

        # Every attempt is on both providers or on neither; acknowledged ones on both.
        on = {}
        for side, rp in (("A", left), ("B", right)):
            status, doc = setup.request("GET", f"/resource_providers/{rp}/allocations")
            assert status == 200
            on[side] = set(doc["allocations"])
        for writer, log in enumerate(logs):
            for attempt in range(log.attempted):
                present = [consumer(writer, attempt, side) in on[side] for side in ("A", "B")]
                assert present[0] == present[1], (writer, attempt, present)
                if attempt in log.acknowledged:
                    assert present == [True, True], (writer, attempt)
        status, usages = setup.request("GET", f"/resource_providers/{left}/usages")
        assert usages["usages"]["VCPU"] == len(on["A"])

        status, doc = setup.request("GET", f"/resource_providers/{inventory_rp}/inventories")
        final = _totals(doc)
        assert len(final) == 1 and max(inventory_log.acknowledged) <= final.pop() <= inventory_log.attempted + 100
        assert all(len(totals) <= 1 for totals in inventory_seen), [t for t in inventory_seen if len(t) > 1]

        log_text = server.log()
        assert all(f"Worker (pid:{pid}) was sent SIGKILL" in log_text for pid in killed), log_text[-3000:]
        print(f"\n{sum(log.attempted for log in logs)} allocation writes "
              f"({sum(log.broken for log in logs)} cut off by the kills), "
              f"{inventory_log.attempted} inventory writes ({inventory_log.broken} cut off)")
        setup.close()
