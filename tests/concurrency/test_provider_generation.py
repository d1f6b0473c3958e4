"""Several processes race to update one provider through a real multi-worker
``billeting serve``; the provider generation must serialize them.

Each writer process loops for a fixed time: read the provider's generation,
then PUT a payload unique to (writer, attempt) with that generation. Because
every payload is unique, every successful write really changes the provider
and bumps its generation by exactly one (docs/design/placement-model.md#generations). Afterwards:

* every PUT answered 200 or 409 ``placement.concurrent_update``, nothing else;
* for each generation value, exactly one writer won;
* the winners' generations are contiguous from the start value, and the final
  generation equals the start plus the number of wins (no lost update);
* the provider holds exactly the payload of the last win.

Runs on whichever backend ``BILLETING_TEST_DB`` names, SQLite included.
"""
from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from dataclasses import dataclass

import os_traits
import pytest

from tests.concurrency.serve import Http, running_server

pytestmark = pytest.mark.slow

WRITERS = 4
SERVER_WORKERS = 3
RACE_SECONDS = 2.0
CONCURRENT_UPDATE = "placement.concurrent_update"


@dataclass(slots=True, frozen=True)
class Attempt:
    writer: int
    number: int
    seen_generation: int
    status: int
    code: str | None
    new_generation: int | None
    payload: tuple


# --- what is written --------------------------------------------------------

_TRAIT_POOL = sorted(t for t in os_traits.get_traits() if t.startswith("HW_"))[:WRITERS + 20]


def payload_for(kind: str, writer: int, number: int) -> tuple:
    """A value no other (writer, number) pair produces."""
    if kind == "inventories":
        return (writer * 1_000_000 + number + 1,)
    # One marker trait per writer plus the attempt number in binary.
    bits = [_TRAIT_POOL[WRITERS + i] for i in range(20) if (number + 1) >> i & 1]
    return tuple(sorted([_TRAIT_POOL[writer], *bits]))


def put_body(kind: str, generation: int, payload: tuple) -> dict:
    if kind == "inventories":
        return {"resource_provider_generation": generation,
                "inventories": {"VCPU": {"total": payload[0]}}}
    return {"resource_provider_generation": generation, "traits": list(payload)}


def state_of(kind: str, body: dict) -> tuple:
    if kind == "inventories":
        return (body["inventories"]["VCPU"]["total"],) if body["inventories"] else ()
    return tuple(sorted(body["traits"]))


# --- the writer processes -----------------------------------------------------

def _writer(base_url: str, path: str, kind: str, writer: int, barrier, results) -> None:
    http = Http(base_url)
    attempts: list[Attempt] = []
    try:
        barrier.wait(timeout=30)
        deadline = time.monotonic() + RACE_SECONDS
        number = 0
        while time.monotonic() < deadline:
            status, body = http.request("GET", path)
            assert status == 200, (status, body)
            seen = body["resource_provider_generation"]
            payload = payload_for(kind, writer, number)
            status, body = http.request("PUT", path, put_body(kind, seen, payload))
            code = body["errors"][0].get("code") if status >= 400 and body.get("errors") else None
            attempts.append(Attempt(writer, number, seen, status, code,
                                    body.get("resource_provider_generation") if status == 200 else None,
                                    payload))
            number += 1
    finally:
        http.close()
        results.put(attempts)


def race(base_url: str, path: str, kind: str) -> list[Attempt]:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WRITERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(base_url, path, kind, w, barrier, results))
             for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    collected: list[Attempt] = []
    try:
        for _ in procs:
            collected.extend(results.get(timeout=RACE_SECONDS + 60))
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert all(proc.exitcode == 0 for proc in procs), [proc.exitcode for proc in procs]
    return collected


# --- the test -----------------------------------------------------------------

@pytest.fixture(scope="module")
def server(db_url, engine):
    with running_server(db_url, workers=SERVER_WORKERS, args=("--log-level", "WARNING")) as running:
        yield running


@pytest.mark.parametrize("kind", ["inventories", "traits"])
def test_one_winner_per_generation_and_no_lost_update(server, engine, kind):
    admin = Http(server.url)
    try:
        status, body = admin.request("POST", "/resource_providers", {"name": f"contended-{kind}"})
        assert status == 200, body
        uuid = body["uuid"]
        path = f"/resource_providers/{uuid}/{kind}"
        status, body = admin.request("GET", path)
        assert status == 200, body
        start = body["resource_provider_generation"]

        attempts = race(server.url, path, kind)

        status, final = admin.request("GET", path)
        assert status == 200, final
    finally:
        admin.close()

    wins = [a for a in attempts if a.status == 200]
    losses = [a for a in attempts if a.status != 200]
    # Every refusal is the generation conflict, never a 500 or another error.
    assert {(a.status, a.code) for a in losses} <= {(409, CONCURRENT_UPDATE)}, \
        Counter((a.status, a.code) for a in losses)
    assert losses, "the writers never collided; the race proved nothing"
    assert len(wins) >= WRITERS

    # Exactly one winner per generation value, and each win bumped by one.
    winners_per_generation = Counter(a.seen_generation for a in wins)
    assert all(count == 1 for count in winners_per_generation.values()), winners_per_generation
    assert all(a.new_generation == a.seen_generation + 1 for a in wins)
    # Every generation some writer tried and lost on was won by exactly one other.
    assert {a.seen_generation for a in losses} <= set(winners_per_generation)

    # No lost update: wins are contiguous from the start and account for the
    # whole advance of the generation.
    assert sorted(winners_per_generation) == list(range(start, start + len(wins)))
    assert final["resource_provider_generation"] == start + len(wins)

    last_win = max(wins, key=lambda a: a.seen_generation)
    assert state_of(kind, final) == last_win.payload
