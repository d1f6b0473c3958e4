"""Reads never fail while the fleet changes under them.

A real ``billeting serve --workers 2`` runs against the test database. Two
writer threads keep growing and felling provider trees (root, NUMA nodes,
devices, with inventories and traits) and claiming and freeing allocations
on the flat hosts, while reader threads ask for allocation candidates (full
and limited, nested and flat, old and new microversions) and list providers,
usages and inventories. Every read must be answered with a 2xx (or a 404 for
a provider that was just deleted), never a 5xx, and every candidates answer
must be whole: each provider it allocates from or maps has its summary, and
so has each summary's parent and root.
"""
from __future__ import annotations

import random
import threading
import time
import uuid as uuidlib

import pytest

from tests.stress.harness import ApiClient, Exchange, Journal, PlacementServer

pytestmark = pytest.mark.slow

WORKERS = 2
READERS = 4
CHURN_S = 6.0
SEED = 20261123

NESTED = ("resources=DISK_GB:10&resources_COMPUTE=VCPU:1&resources_FPGA=FPGA:1"
          "&group_policy=none&same_subtree=_COMPUTE,_FPGA")
FLAT = "resources=VCPU:1,MEMORY_MB:128"
# (query, microversion): mv 1.28 is nested-blind, 1.16 has no mappings
QUERIES = [
    (NESTED, "1.39"), (NESTED + "&limit=3", "1.39"),
    (FLAT, "1.39"), (FLAT + "&limit=3", "1.39"), (FLAT, "1.28"), (FLAT + "&limit=2", "1.16"),
    ("resources=DISK_GB:10,VCPU:1", "1.39"), ("resources=VCPU:1&required=CUSTOM_CHURN", "1.39"),
]


class Fleet:
    """The trees and hosts the writers made (uuids), shared with the readers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trees: list[list[str]] = []  # providers of each tree, root first
        self.hosts: list[str] = []

    def any_provider(self, rng: random.Random) -> str | None:
        with self.lock:
            choices = [p for tree in self.trees for p in tree] + self.hosts
        return rng.choice(choices) if choices else None


def _create(api: ApiClient, name: str, parent: str | None, inventory: dict, traits: list[str]) -> str | None:
    body = {"name": name, "uuid": str(uuidlib.uuid4())}
    if parent:
        body["parent_provider_uuid"] = parent
    made = api.request("POST", "/resource_providers", body, op="churn", mv="1.20")
    if made.status != 200:
        return None
    uuid, generation = made.reply["uuid"], made.reply["generation"]
    if inventory:
        put = api.request("PUT", f"/resource_providers/{uuid}/inventories",
                          {"resource_provider_generation": generation, "inventories": inventory}, op="churn")
        generation = put.reply["resource_provider_generation"] if put.status == 200 else generation
    if traits:
        api.request("PUT", f"/resource_providers/{uuid}/traits",
                    {"resource_provider_generation": generation, "traits": traits}, op="churn")
    return uuid


def _grow_tree(api: ApiClient, serial: str) -> list[str]:
    root = _create(api, f"churn-{serial}", None, {"DISK_GB": {"total": 100}}, [])
    tree = [root]
    for numa in (0, 1):
        node = _create(api, f"churn-{serial}-numa{numa}", root, {"VCPU": {"total": 4}}, ["HW_NUMA_ROOT"])
        tree.append(node)
        tree.append(_create(api, f"churn-{serial}-fpga{numa}", node, {"FPGA": {"total": 1}}, ["CUSTOM_CHURN"]))
    return tree


def _fell_tree(api: ApiClient, tree: list[str]) -> None:
    for uuid in reversed(tree):  # devices, then NUMA nodes, then the root
        api.request("DELETE", f"/resource_providers/{uuid}", op="churn")


def _tree_writer(port: int, journal: Journal, fleet: Fleet, deadline: float, seed: int) -> None:
    rng = random.Random(seed)
    api = ApiClient(port, journal, client_id=100, mv="1.39")
    serial = 0
    try:
        while time.monotonic() < deadline:
            with fleet.lock:
                trees = len(fleet.trees)
            if trees > 4 and rng.random() < 0.5:
                with fleet.lock:
                    tree = fleet.trees.pop(rng.randrange(len(fleet.trees)))
                _fell_tree(api, tree)
            else:
                serial += 1
                tree = _grow_tree(api, f"{seed}-{serial}")
                with fleet.lock:
                    fleet.trees.append(tree)
    finally:
        api.close()


def _host_writer(port: int, journal: Journal, fleet: Fleet, deadline: float, seed: int) -> None:
    """Hosts come and go; consumers claim and free on them."""
    rng = random.Random(seed)
    api = ApiClient(port, journal, client_id=101, mv="1.39")
    held: list[tuple[str, str]] = []  # (consumer, host)
    serial = 0
    try:
        while time.monotonic() < deadline:
            roll = rng.random()
            with fleet.lock:
                hosts = list(fleet.hosts)
            if roll < 0.3 or len(hosts) < 3:
                serial += 1
                host = _create(api, f"host-{seed}-{serial}", None,
                               {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024}}, ["CUSTOM_CHURN"])
                with fleet.lock:
                    fleet.hosts.append(host)
            elif roll < 0.45:
                free = [h for h in hosts if h not in {host for _, host in held}]
                if free:
                    gone = rng.choice(free)
                    with fleet.lock:
                        fleet.hosts.remove(gone)
                    api.request("DELETE", f"/resource_providers/{gone}", op="churn")
            elif roll < 0.75 or not held:
                consumer, host = str(uuidlib.uuid4()), rng.choice(hosts)
                claimed = api.request("PUT", f"/allocations/{consumer}", {
                    "allocations": {host: {"resources": {"VCPU": 1, "MEMORY_MB": 128}}},
                    "consumer_generation": None, "project_id": "p", "user_id": "u",
                    "consumer_type": "TEST"}, op="churn")
                if claimed.status == 204:
                    held.append((consumer, host))
            else:
                consumer, _ = held.pop(rng.randrange(len(held)))
                api.request("DELETE", f"/allocations/{consumer}", op="churn")
    finally:
        api.close()


def _whole(answer: dict) -> str | None:
    """Why a candidates answer is not whole (None when it is)."""
    summaries = answer["provider_summaries"]
    for request in answer["allocation_requests"]:
        allocations = request["allocations"]
        used = ([a["resource_provider"]["uuid"] for a in allocations] if isinstance(allocations, list)
                else list(allocations))
        mapped = [u for uuids in request.get("mappings", {}).values() for u in uuids]
        missing = set(used + mapped) - summaries.keys()
        if missing:
            return f"no summary for {sorted(missing)}"
    for uuid, summary in summaries.items():
        for key in ("parent_provider_uuid", "root_provider_uuid"):
            other = summary.get(key)
            if other is not None and other not in summaries:
                return f"{uuid}: {key} {other} has no summary"
    return None


def _reader(port: int, journal: Journal, fleet: Fleet, deadline: float, index: int,
            problems: list[str], counts: list[int]) -> None:
    rng = random.Random(SEED + 10 + index)
    api = ApiClient(port, journal, client_id=index)
    try:
        while time.monotonic() < deadline:
            roll = rng.random()
            if roll < 0.7:
                query, mv = rng.choice(QUERIES)
                got = api.request("GET", f"/allocation_candidates?{query}", op="candidates", mv=mv)
                if got.status == 200:
                    why = _whole(got.reply)
                    if why:
                        problems.append(f"{query} at {mv}: {why}")
                counts[index] += 1
                continue
            provider = fleet.any_provider(rng)
            if roll < 0.8 or provider is None:
                api.request("GET", "/resource_providers", op="list")
            elif roll < 0.9:
                api.request("GET", f"/resource_providers/{provider}/usages", op="usages")
            else:
                api.request("GET", f"/resource_providers/{provider}/inventories", op="inventories")
    finally:
        api.close()


def _describe(exchange: Exchange) -> str:
    answer = exchange.transport_error or str(exchange.reply)[:300]
    return f"{exchange.op}: {exchange.method} {exchange.path} -> {exchange.status} {answer}"


def test_reads_never_fail_while_providers_churn(engine, db_url, test_database, tmp_path):
    journal = Journal()
    fleet = Fleet()
    problems: list[str] = []
    counts = [0] * READERS
    with PlacementServer(db_url, workers=WORKERS, log_path=tmp_path / "server.log") as server:
        setup = ApiClient(server.port, journal, client_id=-1, mv="1.39")
        assert setup.request("PUT", "/traits/CUSTOM_CHURN", op="setup").status in (201, 204)
        for serial in range(6):
            fleet.trees.append(_grow_tree(setup, f"seed-{serial}"))
            fleet.hosts.append(_create(setup, f"host-seed-{serial}", None,
                                       {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024}}, []))
        setup.close()
        deadline = time.monotonic() + CHURN_S
        threads = [threading.Thread(target=_tree_writer, args=(server.port, journal, fleet, deadline, SEED)),
                   threading.Thread(target=_host_writer, args=(server.port, journal, fleet, deadline, SEED + 1))]
        threads += [threading.Thread(target=_reader, args=(server.port, journal, fleet, deadline, i,
                                                           problems, counts))
                    for i in range(READERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=CHURN_S + 120)
            assert not thread.is_alive(), f"{thread.name} did not finish"
        log = server.log_tail(10_000)
    failed = [_describe(e) for e in journal.exchanges if e.transport_error or e.status >= 500]
    # A provider deleted since the reader picked it is a 404; nothing else may fail.
    refused = [_describe(e) for e in journal.exchanges
               if e.method == "GET" and 400 <= e.status < 500
               and not (e.status == 404 and e.op in ("usages", "inventories"))]
    print(f"\nreads under churn [{test_database.backend}]: {len(journal.exchanges)} exchanges, "
          f"{sum(counts)} candidates answers, {len(failed)} failed")
    assert not failed, "\n".join(failed[:20]) + "\n" + server.log_tail()
    assert not refused, "\n".join(refused[:20])
    assert not problems, "\n".join(problems[:20])
    assert "Traceback" not in log, log[-5000:]
    assert min(counts) > 10
