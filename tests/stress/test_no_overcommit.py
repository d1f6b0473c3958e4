"""Many concurrent clients against a multi-process server never overcommit.

A real ``billeting serve --workers 3`` runs against the test database
(SQLite, PostgreSQL or MariaDB, from BILLETING_TEST_DB). Twenty client
threads claim, move, migrate and free allocations on three small
providers while a monitor samples their usages. Afterwards the server's
state must equal what the clients were told they got, to the unit:
usages, per-provider allocations, every consumer's allocations and
generation, per-project usages; no provider may ever be over capacity; and
every refused write must be a 409 with an expected code.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from billeting.placement import allocations
from tests.stress.harness import ApiClient, Exchange, Journal, PlacementServer
from tests.stress.workload import (
    CONSUMER_GENERATION,
    SHARED_PROJECT,
    SHARED_RESOURCES,
    SHARED_TYPE,
    SHARED_USER,
    UNEXPECTED,
    Holding,
    ProviderSpec,
    StressClient,
    allocation_body,
)

WORKERS = 3
CLIENTS = 20
OPS_PER_CLIENT = 30
SHARED_CONSUMERS = 3
WORKLOAD_DEADLINE_S = 22.0  # clients stop starting new operations after this
SEED = 20240917


def _providers() -> list[ProviderSpec]:
    return [
        ProviderSpec("stress-plain", {
            "VCPU": {"total": 16},
            "MEMORY_MB": {"total": 4096}}),
        ProviderSpec("stress-overcommit", {  # (12 - 2) * 2.0 = 20 VCPU
            "VCPU": {"total": 12, "reserved": 2, "allocation_ratio": 2.0},
            "MEMORY_MB": {"total": 4096, "reserved": 512}}),
        ProviderSpec("stress-small", {  # 8 * 1.5 = 12 VCPU
            "VCPU": {"total": 8, "allocation_ratio": 1.5},
            "MEMORY_MB": {"total": 2048}}),
    ]


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        self.problems.append(problem)

    def check(self, condition: bool, problem: str) -> None:
        if not condition:
            self.add(problem)


def _describe(exchange: Exchange) -> str:
    answer = exchange.transport_error or json.dumps(exchange.reply)[:400]
    return f"client {exchange.client} {exchange.op}: {exchange.method} {exchange.path} → {exchange.status} {answer}"


# --- setup ------------------------------------------------------------------------

def _create_providers(api: ApiClient, specs: list[ProviderSpec]) -> None:
    for spec in specs:
        created = api.request("POST", "/resource_providers", {"name": spec.name}, op="setup")
        assert created.status == 200, _describe(created)
        spec.uuid = created.reply["uuid"]
        body = {"resource_provider_generation": created.reply["generation"],
                "inventories": spec.inventories}
        inventories = api.request("PUT", f"/resource_providers/{spec.uuid}/inventories", body,
                                  op="setup")
        assert inventories.status == 200, _describe(inventories)


def _create_shared_consumers(api: ApiClient, specs: list[ProviderSpec]) -> dict[str, Holding]:
    shared = {}
    for index in range(SHARED_CONSUMERS):
        consumer = f"5a4ed000-0000-4000-8000-{index:012x}"
        allocations = {specs[index % len(specs)].uuid: dict(SHARED_RESOURCES)}
        body = allocation_body(allocations, project=SHARED_PROJECT, user=SHARED_USER,
                               generation=None, consumer_type=SHARED_TYPE)
        created = api.request("PUT", f"/allocations/{consumer}", body, op="setup")
        assert created.status == 204, _describe(created)
        shared[consumer] = Holding(SHARED_PROJECT, SHARED_USER, SHARED_TYPE, allocations, 1)
    return shared


# --- running ----------------------------------------------------------------------

class UsageMonitor(threading.Thread):
    """Samples every provider's usages until stopped; any sample over capacity is a finding."""

    def __init__(self, api: ApiClient, specs: list[ProviderSpec], findings: Findings) -> None:
        super().__init__(name="usage-monitor", daemon=True)
        self.api, self.specs, self.findings = api, specs, findings
        self.samples = 0
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                for spec in self.specs:
                    seen = self.api.request("GET", f"/resource_providers/{spec.uuid}/usages",
                                            op="monitor")
                    if seen.status != 200:
                        continue  # reported by the journal scan
                    self.samples += 1
                    for rc, used in seen.reply["usages"].items():
                        self.findings.check(
                            used <= spec.capacity(rc),
                            f"monitor saw {spec.name} {rc} used {used} > capacity {spec.capacity(rc)}")
                self._stop_event.wait(0.05)
        finally:
            self.api.close()


def _run_clients(port: int, journal: Journal, specs: list[ProviderSpec], shared: list[str],
                 findings: Findings) -> tuple[list[StressClient], int]:
    clients = [StressClient(i, ApiClient(port, journal, client_id=i), specs, shared,
                            seed=SEED + i) for i in range(CLIENTS)]
    monitor = UsageMonitor(ApiClient(port, journal, client_id=-2), specs, findings)
    deadline = time.monotonic() + WORKLOAD_DEADLINE_S
    threads = [threading.Thread(target=c.run, args=(OPS_PER_CLIENT, deadline), name=f"client-{c.index}")
               for c in clients]
    monitor.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WORKLOAD_DEADLINE_S + 90)
        findings.check(not thread.is_alive(), f"{thread.name} did not finish")
    monitor.stop()
    monitor.join(timeout=30)
    return clients, monitor.samples


# --- checking ---------------------------------------------------------------------

def _expected_state(clients: list[StressClient], shared: dict[str, Holding],
                    findings: Findings) -> dict[str, Holding]:
    """Every consumer that should hold allocations now, per the clients' own logs."""
    expected: dict[str, Holding] = {}
    for client in clients:
        expected.update(client.ledger.held)
    writes_by_consumer: dict[str, list] = {c: [] for c in shared}
    for client in clients:
        for write in client.ledger.shared_writes:
            writes_by_consumer[write.consumer].append(write)
    for consumer, holding in shared.items():
        writes = sorted(writes_by_consumer[consumer], key=lambda w: w.expected_generation)
        chain = [w.expected_generation for w in writes]
        # Each accepted write was conditioned on the generation the previous
        # one produced: a repeat would be a lost update, a gap a phantom one.
        findings.check(chain == list(range(1, len(writes) + 1)),
                       f"shared consumer {consumer}: accepted writes conditioned on generations {chain}")
        final = Holding(holding.project, holding.user, holding.consumer_type,
                        writes[-1].allocations if writes else holding.allocations, 1 + len(writes))
        expected[consumer] = final
    return expected


def _provider_usage(expected: dict[str, Holding]) -> dict[str, dict[str, int]]:
    usage: dict[str, dict[str, int]] = {}
    for holding in expected.values():
        for rp, resources in holding.allocations.items():
            for rc, amount in resources.items():
                usage.setdefault(rp, {}).setdefault(rc, 0)
                usage[rp][rc] += amount
    return usage


def _check_providers(api: ApiClient, specs: list[ProviderSpec], expected: dict[str, Holding],
                     findings: Findings) -> None:
    model = _provider_usage(expected)
    for spec in specs:
        want = {rc: model.get(spec.uuid, {}).get(rc, 0) for rc in spec.inventories}
        usages = api.request("GET", f"/resource_providers/{spec.uuid}/usages", op="final")
        allocs = api.request("GET", f"/resource_providers/{spec.uuid}/allocations", op="final")
        if usages.status != 200 or allocs.status != 200:
            findings.add(f"final reads of {spec.name} failed: {_describe(usages)} / {_describe(allocs)}")
            continue
        got = usages.reply["usages"]
        findings.check(got == want, f"{spec.name}: usages {got} but clients were granted {want}")
        summed: dict[str, int] = {}
        for entry in allocs.reply["allocations"].values():
            for rc, amount in entry["resources"].items():
                summed[rc] = summed.get(rc, 0) + amount
        findings.check({rc: summed.get(rc, 0) for rc in spec.inventories} == want,
                       f"{spec.name}: allocations sum to {summed} but clients were granted {want}")
        holders = {c: {"resources": h.allocations[spec.uuid], "consumer_generation": h.generation}
                   for c, h in expected.items() if spec.uuid in h.allocations}
        findings.check(allocs.reply["allocations"] == holders,
                       f"{spec.name}: consumers {sorted(allocs.reply['allocations'])} "
                       f"but clients believe {sorted(holders)}")
        for rc, used in got.items():
            findings.check(used <= spec.capacity(rc),
                           f"{spec.name}: {rc} used {used} > capacity {spec.capacity(rc)}")


def _check_consumers(api: ApiClient, expected: dict[str, Holding], gone: set[str],
                     findings: Findings) -> None:
    for consumer, holding in sorted(expected.items()):
        seen = api.request("GET", f"/allocations/{consumer}", op="final")
        want = {
            "allocations": {rp: res for rp, res in holding.allocations.items()},
            "project_id": holding.project,
            "user_id": holding.user,
            "consumer_generation": holding.generation,
            "consumer_type": holding.consumer_type,
        }
        got = dict(seen.reply or {})
        got["allocations"] = {rp: entry.get("resources") for rp, entry in got.get("allocations", {}).items()}
        findings.check(seen.status == 200 and got == want,
                       f"consumer {consumer}: server has {seen.status} {got}, client believes {want}")
    for consumer in sorted(gone - expected.keys()):
        seen = api.request("GET", f"/allocations/{consumer}", op="final")
        findings.check(seen.status == 200 and seen.reply == {"allocations": {}},
                       f"consumer {consumer} should hold nothing: {_describe(seen)}")


def _check_project_usages(api: ApiClient, expected: dict[str, Holding], findings: Findings) -> None:
    """GET /usages at 1.38 groups the same numbers by project and consumer type."""
    want: dict[str, dict[str, dict[str, int]]] = {}
    for holding in expected.values():
        group = want.setdefault(holding.project, {}).setdefault(
            holding.consumer_type, {"consumer_count": 0})
        group["consumer_count"] += 1
        for resources in holding.allocations.values():
            for rc, amount in resources.items():
                group[rc] = group.get(rc, 0) + amount
    for project in sorted(set(want) | {f"stress-project-{i}" for i in range(3)}):
        seen = api.request("GET", f"/usages?project_id={project}", op="final")
        findings.check(seen.status == 200 and seen.reply == {"usages": want.get(project, {})},
                       f"project {project}: GET /usages {_describe(seen)}, expected {want.get(project, {})}")


def _scan_journal(journal: Journal, clients: list[StressClient], findings: Findings) -> Counter:
    for exchange in journal.exchanges:
        if exchange.transport_error or exchange.status >= 500:
            findings.add(f"no proper answer: {_describe(exchange)}")
    reasons: Counter = Counter()
    for client in clients:
        findings.check(client.crash is None, f"client {client.index} crashed: {client.crash}")
        for op, reason, exchange in client.ledger.rejections:
            reasons[reason] += 1
            # Private consumers' generations are always known to their owner.
            if reason == UNEXPECTED or (reason == CONSUMER_GENERATION and op != "move-shared"):
                findings.add(f"unexpected refusal: {_describe(exchange)}")
    return reasons


# --- the test ---------------------------------------------------------------------

@pytest.mark.slow
def test_concurrent_writers_never_overcommit(engine, db_url, test_database, tmp_path):
    started = time.monotonic()
    specs = _providers()
    journal = Journal()
    findings = Findings()
    server = PlacementServer(db_url, workers=WORKERS, log_path=tmp_path / "server.log")
    with server:
        ready_s = time.monotonic() - started
        setup = ApiClient(server.port, journal, client_id=-1)
        _create_providers(setup, specs)
        shared = _create_shared_consumers(setup, specs)
        setup.close()

        workload_started = time.monotonic()
        clients, samples = _run_clients(server.port, journal, specs, sorted(shared), findings)
        workload_s = time.monotonic() - workload_started
        checks_started = time.monotonic()

        final = ApiClient(server.port, journal, client_id=-3)
        expected = _expected_state(clients, shared, findings)
        _check_providers(final, specs, expected, findings)
        gone = set()
        for client in clients:
            gone |= client.ledger.freed | client.ledger.never_granted
        _check_consumers(final, expected, gone, findings)
        _check_project_usages(final, expected, findings)
        final.close()
        checks_s = time.monotonic() - checks_started
    reasons = _scan_journal(journal, clients, findings)
    # The usage kept on inventory rows (what candidates read) stayed the sum
    # of the allocations through every concurrent write.
    with engine.connect() as conn:
        out_of_step = allocations.usage_out_of_step(conn)
    findings.check(not out_of_step, f"kept usage differs from the allocations: {out_of_step[:5]}")
    log = server.log_tail(10_000)
    findings.check("Traceback" not in log, f"server logged a traceback:\n{server.log_tail()}")

    writes = sum(c.ledger.writes for c in clients)
    accepted = sum(c.ledger.accepted for c in clients)
    summary = {
        "backend": test_database.backend,
        "workers": WORKERS,
        "clients": CLIENTS,
        "writes_attempted": writes,
        "accepted": accepted,
        "rejected": dict(sorted(reasons.items())),
        "consumers_holding": len(expected),
        "usage_samples": samples,
        "server_start_s": round(ready_s, 2),
        "workload_s": round(workload_s, 2),
        "checks_s": round(checks_s, 2),
        "total_s": round(time.monotonic() - started, 2),
        "final_check": "ok" if not findings.problems else f"FAILED ({len(findings.problems)} problems)",
        "problems": findings.problems[:20],
    }
    rejected = ", ".join(f"{k}={v}" for k, v in summary["rejected"].items()) or "none"
    print(f"\nno-overcommit stress [{summary['backend']}]: workers={WORKERS} clients={CLIENTS} "
          f"writes={writes} accepted={accepted} rejected: {rejected}; "
          f"usage samples={samples}; final check: {summary['final_check']} "
          f"(server start {summary['server_start_s']}s, workload {summary['workload_s']}s, "
          f"checks {summary['checks_s']}s, total {summary['total_s']}s)")
    report_path = os.environ.get("BILLETING_STRESS_REPORT")
    if report_path:
        with open(report_path, "w", encoding="utf-8") as report:
            json.dump(summary, report, indent=2)

    assert not findings.problems, "\n".join(findings.problems[:30])
    assert accepted > 0 and writes >= CLIENTS
