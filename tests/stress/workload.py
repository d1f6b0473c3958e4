"""What the stress clients do, and the ledger each keeps of what it was granted.

Every client owns its private consumers outright, so it always knows their
exact allocations and generation: it claims new ones (PUT, generation
null), moves them (PUT with the generation, or a nova-style migration
through POST /allocations that hands the source allocations to a new
MIGRATION consumer) and frees them (DELETE, or PUT {} with the
generation). A few *shared* consumers are moved by every client after a
GET, so clients race on their generations; for those the ledger records
each accepted write with the generation it was conditioned on, which must
form an unbroken chain afterwards.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from tests.stress.harness import ApiClient, Exchange

Allocations = dict[str, dict[str, int]]  # provider uuid → {resource class: amount}

CAPACITY = "capacity"
CONSUMER_GENERATION = "consumer_generation"
CONCURRENT_UPDATE = "concurrent_update"
UNEXPECTED = "unexpected"

SHARED_PROJECT = "stress-shared"
SHARED_USER = "stress-shared-user"
SHARED_TYPE = "SHARED"
SHARED_RESOURCES = {"VCPU": 1, "MEMORY_MB": 64}


@dataclass(slots=True)
class ProviderSpec:
    name: str
    inventories: dict[str, dict]  # resource class → inventory body fields
    uuid: str = ""

    def capacity(self, rc: str) -> float:
        inv = self.inventories[rc]
        return (inv["total"] - inv.get("reserved", 0)) * inv.get("allocation_ratio", 1.0)


@dataclass(slots=True)
class Holding:
    """A consumer as its owner believes it to be."""

    project: str
    user: str
    consumer_type: str
    allocations: Allocations
    generation: int


@dataclass(slots=True)
class SharedWrite:
    consumer: str
    expected_generation: int
    allocations: Allocations


@dataclass
class Ledger:
    """One client's view of what the server granted it."""

    held: dict[str, Holding] = field(default_factory=dict)
    freed: set[str] = field(default_factory=set)
    never_granted: set[str] = field(default_factory=set)
    shared_writes: list[SharedWrite] = field(default_factory=list)
    # (op, reason, exchange) for every rejected or failed write
    rejections: list[tuple[str, str, Exchange]] = field(default_factory=list)
    writes: int = 0
    accepted: int = 0


def classify_rejection(exchange: Exchange) -> str:
    """Why a write was refused; ``UNEXPECTED`` for anything Placement's rules do not allow here."""
    if exchange.status != 409:
        return UNEXPECTED
    code = exchange.error.get("code")
    detail = exchange.error.get("detail", "")
    if code == "placement.undefined_code" and "Unable to allocate inventory" in detail:
        return CAPACITY
    if code == "placement.concurrent_update":
        if "consumer generation conflict" in detail:
            return CONSUMER_GENERATION
        return CONCURRENT_UPDATE
    return UNEXPECTED


def allocation_body(allocations: Allocations, *, project: str, user: str,
                    generation: int | None, consumer_type: str) -> dict:
    return {
        "allocations": {rp: {"resources": dict(res)} for rp, res in allocations.items()},
        "project_id": project,
        "user_id": user,
        "consumer_generation": generation,
        "consumer_type": consumer_type,
    }


def totals(allocations: Allocations) -> dict[str, int]:
    summed: dict[str, int] = {}
    for resources in allocations.values():
        for rc, amount in resources.items():
            summed[rc] = summed.get(rc, 0) + amount
    return summed


class StressClient:
    """One thread's worth of traffic; ``run`` until ``ops`` are done or time is up."""

    def __init__(self, index: int, api: ApiClient, providers: list[ProviderSpec],
                 shared: list[str], *, seed: int) -> None:
        self.index = index
        self.api = api
        self.providers = [p.uuid for p in providers]
        self.shared = shared
        self.rng = random.Random(seed)
        self.project = f"stress-project-{index % 3}"
        self.user = f"stress-user-{index}"
        self.ledger = Ledger()
        self.crash: str | None = None
        self._serial = 0

    # --- choosing -------------------------------------------------------------

    def run(self, ops: int, deadline: float) -> None:
        try:
            for _ in range(ops):
                if time.monotonic() > deadline:
                    break
                self.step()
        except Exception as exc:  # noqa: BLE001 - a harness bug must fail the test, not vanish
            self.crash = f"{type(exc).__name__}: {exc}"
        finally:
            self.api.close()

    def step(self) -> None:
        roll = self.rng.random()
        held = self.ledger.held
        if roll < 0.12 and self.shared:
            self.move_shared()
        elif not held or (roll < 0.45 and len(held) < 3):
            self.claim()
        elif roll < 0.62:
            self.move()
        elif roll < 0.75:
            self.migrate()
        else:
            self.free()

    def _new_consumer(self) -> str:
        # Readable in server logs and unique across clients and runs.
        self._serial += 1
        tail = f"{self.index:04x}{self._serial:08x}"
        return f"{self.rng.getrandbits(32):08x}-5e55-4000-8000-{tail}"

    def _request(self) -> dict[str, int]:
        return {"VCPU": self.rng.randint(1, 2), "MEMORY_MB": 64 * self.rng.randint(1, 4)}

    def _place(self, resources: dict[str, int], avoid: set[str] = frozenset()) -> Allocations:
        """All on one provider, or (one time in five) VCPU and memory apart."""
        choices = [p for p in self.providers if p not in avoid] or self.providers
        if len(resources) > 1 and len(choices) > 1 and self.rng.random() < 0.2:
            first, second = self.rng.sample(choices, 2)
            return {first: {"VCPU": resources["VCPU"]},
                    second: {rc: n for rc, n in resources.items() if rc != "VCPU"}}
        return {self.rng.choice(choices): dict(resources)}

    def _write(self, op: str, method: str, path: str, body: object) -> Exchange | None:
        """Send one write; ``None`` when it was accepted (204)."""
        self.ledger.writes += 1
        exchange = self.api.request(method, path, body, op=op)
        if exchange.status == 204:
            self.ledger.accepted += 1
            return None
        self.ledger.rejections.append((op, classify_rejection(exchange), exchange))
        return exchange

    # --- operations -----------------------------------------------------------

    def claim(self) -> None:
        consumer = self._new_consumer()
        allocations = self._place(self._request())
        body = allocation_body(allocations, project=self.project, user=self.user,
                               generation=None, consumer_type="INSTANCE")
        if self._write("claim", "PUT", f"/allocations/{consumer}", body) is None:
            self.ledger.held[consumer] = Holding(self.project, self.user, "INSTANCE",
                                                 allocations, 1)
        else:
            self.ledger.never_granted.add(consumer)

    def move(self) -> None:
        consumer = self.rng.choice(sorted(self.ledger.held))
        holding = self.ledger.held[consumer]
        resources = totals(holding.allocations)
        if self.rng.random() < 0.3:
            resources = self._request()  # resize while moving
        allocations = self._place(resources, avoid=set(holding.allocations))
        body = allocation_body(allocations, project=holding.project, user=holding.user,
                               generation=holding.generation, consumer_type=holding.consumer_type)
        if self._write("move", "PUT", f"/allocations/{consumer}", body) is None:
            holding.allocations = allocations
            holding.generation += 1

    def migrate(self) -> None:
        """Nova's move: the source allocations go to a new migration consumer
        and the instance gets the destination, in one POST."""
        instances = sorted(c for c, h in self.ledger.held.items() if h.consumer_type == "INSTANCE")
        if not instances:
            self.claim()
            return
        consumer = self.rng.choice(instances)
        holding = self.ledger.held[consumer]
        migration = self._new_consumer()
        destination = {self.rng.choice([p for p in self.providers
                                        if p not in holding.allocations] or self.providers):
                       totals(holding.allocations)}
        body = {
            migration: allocation_body(holding.allocations, project=holding.project,
                                       user=holding.user, generation=None,
                                       consumer_type="MIGRATION"),
            consumer: allocation_body(destination, project=holding.project, user=holding.user,
                                      generation=holding.generation,
                                      consumer_type=holding.consumer_type),
        }
        if self._write("migrate", "POST", "/allocations", body) is None:
            self.ledger.held[migration] = Holding(holding.project, holding.user, "MIGRATION",
                                                  holding.allocations, 1)
            holding.allocations = destination
            holding.generation += 1
        else:
            self.ledger.never_granted.add(migration)

    def free(self) -> None:
        consumer = self.rng.choice(sorted(self.ledger.held))
        holding = self.ledger.held[consumer]
        if self.rng.random() < 0.5:
            refused = self._write("free-delete", "DELETE", f"/allocations/{consumer}", None)
        else:
            body = allocation_body({}, project=holding.project, user=holding.user,
                                   generation=holding.generation,
                                   consumer_type=holding.consumer_type)
            refused = self._write("free-put", "PUT", f"/allocations/{consumer}", body)
        if refused is None:
            del self.ledger.held[consumer]
            self.ledger.freed.add(consumer)

    def move_shared(self) -> None:
        consumer = self.rng.choice(self.shared)
        seen = self.api.request("GET", f"/allocations/{consumer}", op="read-shared")
        if seen.status != 200 or "consumer_generation" not in (seen.reply or {}):
            return  # the final checks report any non-200 read
        generation = seen.reply["consumer_generation"]
        allocations = {self.rng.choice([p for p in self.providers if p not in seen.reply["allocations"]]
                                       or self.providers): dict(SHARED_RESOURCES)}
        body = allocation_body(allocations, project=SHARED_PROJECT, user=SHARED_USER,
                               generation=generation, consumer_type=SHARED_TYPE)
        if self._write("move-shared", "PUT", f"/allocations/{consumer}", body) is None:
            self.ledger.shared_writes.append(SharedWrite(consumer, generation, allocations))
