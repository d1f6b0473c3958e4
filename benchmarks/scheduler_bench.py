#!/usr/bin/env python3
"""Select + claim benchmark for Billeting's scheduler (issue 8's targets).

It loads a fleet of flat hosts into an empty Placement database once, then
measures the real scheduler (filters, weighers, claims) against it:

  single   sequential single-instance requests: latency p50/p95/p99
  clients  C scheduler processes, each sending single-instance requests
           back to back: instances placed per second
  service  one ``billeting scheduler serve`` (--service-workers processes)
           and C client processes, each sending ``POST /selections`` back
           to back over its own keep-alive connection: instances placed per
           second, as the scheduler's callers see it (opt-in: not in the
           default --phases)
  multi    one request for M instances at a time: latency p50
  verify   no provider holds more than its capacity

--client picks how the scheduler reaches Placement: ``http`` (a real
``billeting serve --workers 2`` on the same database, started here unless
--placement-url is given) or ``inprocess`` (Placement's domain code in the
scheduler's own process). Results: JSON on stdout, a summary on stderr.

    createdb -h 127.0.0.1 -U postgres sched_bench
    .venv/bin/python benchmarks/scheduler_bench.py \\
        --db postgresql+psycopg://postgres@127.0.0.1/sched_bench --hosts 5000 --client http
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager

import cpu_meter  # (this directory: the script's own)

FLAVOR = dict(vcpus=2, memory_mb=4096, root_gb=40)
# The checkout this script belongs to: the servers it starts run from there,
# since ``python -m`` imports from the working directory first (run from
# another checkout, they would run that checkout's code).
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = {"VCPU": 64, "MEMORY_MB": 262144, "DISK_GB": 8000}
# pid -> group name of the servers this run started (for cpu_meter).
SERVERS: dict[int, str] = {}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def log_cpu(phase: dict) -> None:
    if "db_rows_per_instance" in phase:
        log(f"  database rows read per placed instance: {phase['db_rows_per_instance']:.0f}, "
            f"buffer pages touched: {phase['db_pages_per_instance']:.0f}")
    cpu = phase.get("cpu_ms_per_instance")
    if cpu:
        parts = ", ".join(f"{group} {ms:.2f}" for group, ms in cpu.items())
        log(f"  CPU ms per instance: {parts} (machine {phase['machine_busy_pct']:.0f} % busy)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


# --- set-up ------------------------------------------------------------------------

def engine_for(db: str):
    from billeting.placement.store import migrate
    from billeting.common.db.engine import make_engine
    from billeting.placement.store.sync import sync_standard_names

    engine = make_engine(db, pool_size=4)
    migrate.upgrade(engine)
    sync_standard_names(engine)
    return engine


def load_fleet(db: str, hosts: int) -> int:
    """Hosts up to ``hosts``; returns how many providers the fleet has."""
    from billeting.placement_client.inprocess import InProcessPlacementClient
    from billeting.placement_client.model import Inventory

    client = InProcessPlacementClient(engine_for(db))
    existing = len(client.list_providers())
    if existing >= hosts:
        log(f"fleet: {existing} providers already loaded")
        return existing
    started = time.perf_counter()
    for i in range(existing, hosts):
        name = f"bench-host-{i:05d}"
        p = client.create_provider(name, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)))
        client.put_inventories(p.uuid, p.generation, {rc: Inventory(n) for rc, n in HOST.items()})
        if i % 500 == 499:
            log(f"fleet: {i + 1}/{hosts} hosts ({time.perf_counter() - started:.0f} s)")
    log(f"fleet: {hosts} hosts loaded")
    return hosts


def settle(db: str) -> None:
    """VACUUM ANALYZE on PostgreSQL, as autovacuum would have done on a real
    deployment: without statistics and a visibility map the planner guesses
    (sequential scans of a 5,000-row table for an EXISTS, heap fetches on
    every index-only scan). A no-op elsewhere."""
    from sqlalchemy import create_engine, text

    if not db.startswith("postgresql"):
        return
    engine = create_engine(db, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("VACUUM ANALYZE"))
    engine.dispose()
    log("fleet: vacuumed and analyzed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, what: str, log_path: str | None = None) -> None:
    """Until the server started as ``proc`` accepts connections on ``port``
    (a minute at most; it must not exit meanwhile)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            tail = open(log_path, errors="replace").read()[-2000:] if log_path else ""
            raise SystemExit(f"{what} did not start\n{tail}")
        time.sleep(0.2)


@contextmanager
def placement_server(db: str, url: str | None, workers: int):
    if url:
        yield url
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "billeting.cli", "serve", "--db", db, "--port", str(port),
                             "--workers", str(workers), "--log-level", "WARNING"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=REPO)
    wait_listening(proc, port, "billeting serve")
    SERVERS[proc.pid] = "placement"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        SERVERS.pop(proc.pid, None)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


@contextmanager
def scheduler_server(kind: str, db: str, url: str, limit: int, workers: int, threads: int, coalesce: bool):
    """A real ``billeting scheduler serve``: Placement over HTTP at ``url``,
    or in its own processes on ``db``; its API database a temporary SQLite
    file (a selection without a server group reads nothing from it)."""
    port = free_port()
    placement = ["--placement-url", url] if kind == "http" else ["--placement-db", db]
    env = dict(os.environ, BILLETING_SCHEDULER_MAX_PLACEMENT_RESULTS=str(limit),
               BILLETING_SCHEDULER_COALESCE_REQUESTS="true" if coalesce else "false")
    with tempfile.TemporaryDirectory(prefix="sched-bench-api-") as api:
        log_path = os.path.join(api, "scheduler.log")
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen([sys.executable, "-m", "billeting.cli", "scheduler", "serve", "--db",
                                     f"sqlite:///{api}/api.db", "--auto-upgrade", "--port", str(port),
                                     "--workers", str(workers), "--threads", str(threads),
                                     "--log-level", "WARNING", *placement],
                                    stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    cwd=REPO)
            try:
                wait_listening(proc, port, "billeting scheduler serve", log_path)
                SERVERS[proc.pid] = "scheduler"
                yield port
            finally:
                SERVERS.pop(proc.pid, None)
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(30)


def selection_body() -> bytes:
    return json.dumps({"instance_uuids": [str(uuid.uuid4())], "flavor": FLAVOR, "alternates": 2,
                       "project_id": "bench", "user_id": "bench"}).encode()


def _service_client(args) -> tuple[int, int, float]:
    port, seconds, ready = args
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"X-Auth-Token": "admin", "Content-Type": "application/json"}

    def select() -> int:
        conn.request("POST", "/selections", body=selection_body(), headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status

    for _ in range(3):  # warm: every worker process loads its host catalog once
        select()
    ready.wait()
    started = time.time()
    placed = failed = 0
    end = started + seconds
    while time.time() < end:
        if select() == 201:
            placed += 1
        else:
            failed += 1
    conn.close()
    return placed, failed, time.time() - started


def phase_service(port: int, clients: int, seconds: float, db: str) -> dict:
    return run_clients(_service_client, [(port, seconds) for _ in range(clients)], seconds, db)


def make_scheduler(kind: str, db: str, url: str, limit: int, seed: int):
    from billeting.placement_client import http_client
    from billeting.placement_client.inprocess import InProcessPlacementClient
    from billeting.scheduler import Scheduler, SchedulerSettings
    from billeting.scheduler.catalog import PlacementHostCatalog
    from billeting.scheduler.directory import MemoryDirectory

    client = http_client(url) if kind == "http" else InProcessPlacementClient(engine_for(db))
    directory = MemoryDirectory()
    catalog = PlacementHostCatalog(client, directory, refresh_s=3600)
    # (the service reads the same variable: one switch for every phase)
    sample = os.environ.get("BILLETING_SCHEDULER_CANDIDATE_SAMPLE", "adaptive")
    scheduler = Scheduler(client, catalog, directory,
                          SchedulerSettings(max_placement_results=limit, candidate_sample=sample),
                          rng=random.Random(seed))
    catalog.host_uuids()  # the first load is a start-up cost, not a request's
    return scheduler


def request(n: int = 1):
    from billeting.scheduler.nova import Flavor, request_from_nova

    return request_from_nova(Flavor(**FLAVOR), instance_uuids=[str(uuid.uuid4()) for _ in range(n)],
                             project_id="bench", user_id="bench")


# --- phases -------------------------------------------------------------------------

def phase_single(scheduler, count: int) -> dict:
    scheduler.select_destinations(request(), alternates=2)  # warm
    times = []
    for _ in range(count):
        started = time.perf_counter()
        scheduler.select_destinations(request(), alternates=2)
        times.append((time.perf_counter() - started) * 1000)
    return {"requests": count, "p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95),
            "p99_ms": percentile(times, 99)}


def _client_worker(args) -> tuple[int, int, float]:
    kind, db, url, limit, seed, seconds, ready = args
    scheduler = make_scheduler(kind, db, url, limit, seed)
    scheduler.select_destinations(request(), alternates=2)  # warm
    if db.startswith("postgresql"):
        # The start-up reads (the host catalog: rows for every host) reach
        # pg_stat_database only when the backend next reports, up to 10 s
        # after it goes idle: let them land before the phase's first count,
        # or a run with one client adds its start-up to its instances.
        time.sleep(STATS_REPORTED_S)
    # Start together once every process is built and warm (on a busy
    # machine that can take well over a fixed delay).
    ready.wait()
    barrier_at = time.time()
    placed = failed = 0
    end = barrier_at + seconds
    while time.time() < end:
        try:
            scheduler.select_destinations(request(), alternates=2)
            placed += 1
        except Exception:  # noqa: BLE001 - counted; the summary shows it
            failed += 1
    return placed, failed, time.time() - barrier_at


def phase_clients(kind: str, db: str, url: str, limit: int, clients: int, seconds: float) -> dict:
    return run_clients(_client_worker, [(kind, db, url, limit, 1000 + i, seconds) for i in range(clients)],
                       seconds, db)


# A backend reports its counters to pg_stat_database at most once a second
# while busy and at the latest 10 s after it goes idle.
STATS_REPORTED_S = 11


class DatabaseWork:
    """What PostgreSQL did for the benchmark's database between ``start`` and
    ``stop``, from ``pg_stat_database``: rows read (``tup_returned +
    tup_fetched``) and buffer pages touched (``blks_hit + blks_read``, every
    page an executor visited, heap and index, cached or not). Both count
    work, not time: they do not depend on the machine's speed or on how many
    processes share its cores, so CPU per instance that rises while they stay
    flat is each unit of work getting dearer, not more work."""

    _QUERY = ("SELECT tup_returned + tup_fetched, blks_hit + blks_read "
              "FROM pg_stat_database WHERE datname = :n")

    def __init__(self, db: str) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        self.name = make_url(db).database
        self.engine = create_engine(db, isolation_level="AUTOCOMMIT", pool_size=1)
        self.first: tuple[int, int] | None = None

    def _read(self) -> tuple[int, int]:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            conn.execute(text("SELECT pg_stat_clear_snapshot()"))
            rows, pages = conn.execute(text(self._QUERY), {"n": self.name}).one()
            return int(rows), int(pages)

    def start(self) -> None:
        self.first = self._read()

    def stop(self) -> tuple[int, int]:
        """(rows read, buffer pages touched) since ``start``, once the last
        backends have reported."""
        time.sleep(STATS_REPORTED_S)
        rows, pages = self._read()
        self.engine.dispose()
        return rows - self.first[0], pages - self.first[1]


def run_clients(worker, args: list[tuple], seconds: float, db: str) -> dict:
    """``worker(*a, ready)`` in one process per ``a`` of ``args``, started
    together at a barrier; each returns (placed, failed, seconds). The CPU
    every process group spent in the middle of the run is measured too
    (``cpu_meter``), and on PostgreSQL the rows the database read and the
    pages it touched from the barrier to the end (``DatabaseWork``)."""
    clients = len(args)
    work = DatabaseWork(db) if db.startswith("postgresql") else None
    ctx = mp.get_context("spawn")
    window = cpu_meter.Window(dict(SERVERS), cpu_meter.local(db)) if cpu_meter.available() else None
    with ctx.Manager() as manager, ctx.Pool(clients) as pool:
        ready = manager.Barrier(clients + 1)  # and this process, to know when they start
        released = threading.Event()

        def join_barrier():
            try:
                ready.wait()
                if work is not None:
                    work.start()
                released.set()
            except Exception:  # noqa: BLE001 - the run failed before starting; nothing to measure
                pass

        threading.Thread(target=join_barrier, daemon=True).start()
        meter = cpu_meter.middle_of(seconds, window, released) if window is not None else None
        results = pool.map(worker, [(*a, ready) for a in args])
        if meter is not None:
            meter.join(timeout=seconds)
    placed = sum(r[0] for r in results)
    elapsed = max(r[2] for r in results)
    out = {"clients": clients, "seconds": elapsed, "placed": placed, "failed": sum(r[1] for r in results),
           "instances_per_s": placed / elapsed}
    if work is not None and work.first is not None:
        out["db_rows_read"], out["db_pages_touched"] = work.stop()
        out["db_rows_per_instance"] = out["db_rows_read"] / max(placed, 1)
        out["db_pages_per_instance"] = out["db_pages_touched"] / max(placed, 1)
    measured = cpu_meter.per_instance(window, out["instances_per_s"]) if window is not None else None
    if measured is not None:
        out.update(measured)
    return out


def phase_multi(scheduler, size: int, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        lines = scheduler.select_destinations(request(size), alternates=2)
        times.append((time.perf_counter() - started) * 1000)
        assert len(lines) == size
    return {"instances": size, "repeats": repeats, "p50_ms": statistics.median(times),
            "min_ms": min(times), "max_ms": max(times)}


def phase_verify(db: str) -> dict:
    from sqlalchemy import text

    from billeting.common.db.engine import make_engine

    engine = make_engine(db, pool_size=1)
    with engine.connect() as conn:
        over = conn.execute(text("""
            SELECT rp.name, rc.name, SUM(a.used), i.total, i.reserved, i.allocation_ratio
            FROM allocations a
            JOIN inventories i ON i.resource_provider_id = a.resource_provider_id
                               AND i.resource_class_id = a.resource_class_id
            JOIN resource_providers rp ON rp.id = a.resource_provider_id
            JOIN resource_classes rc ON rc.id = a.resource_class_id
            GROUP BY rp.name, rc.name, i.total, i.reserved, i.allocation_ratio
            HAVING SUM(a.used) > (i.total - i.reserved) * i.allocation_ratio""")).fetchall()
        consumers = conn.execute(text("SELECT COUNT(*) FROM consumers")).scalar()
    engine.dispose()
    return {"overcommitted_pairs": len(over), "consumers": consumers}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="Placement database URL (PostgreSQL for the reported figures)")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--client", choices=("http", "inprocess"), default="http")
    ap.add_argument("--placement-url", default=None, help="use this Placement instead of starting one")
    ap.add_argument("--placement-workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=1000, help="[scheduler] max_placement_results")
    ap.add_argument("--candidate-sample", default="adaptive",
                    help="[filter_scheduler] candidate_sample: adaptive, all (the behaviour before sampling) or N")
    ap.add_argument("--single", type=int, default=200, help="sequential single-instance requests")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the concurrent phase")
    ap.add_argument("--multi", type=int, default=50, help="instances in the multi-instance request")
    ap.add_argument("--multi-repeats", type=int, default=5)
    ap.add_argument("--phases", default="single,clients,multi,verify",
                    help="comma-separated: single, clients, multi, verify, service")
    ap.add_argument("--service-workers", type=int, default=1, help="scheduler processes of the service phase")
    ap.add_argument("--service-threads", type=int, default=16, help="request threads per scheduler process")
    ap.add_argument("--no-coalesce", action="store_true",
                    help="service phase: [scheduler] coalesce_requests = false")
    args = ap.parse_args()
    phases = set(args.phases.split(","))
    os.environ["BILLETING_SCHEDULER_CANDIDATE_SAMPLE"] = args.candidate_sample

    if args.db.startswith("sqlite:///") and not args.db.startswith("sqlite:////"):
        # A relative file, made absolute: the servers run from the checkout (REPO).
        args.db = "sqlite:///" + os.path.abspath(args.db[len("sqlite:///"):])
    fleet = load_fleet(args.db, args.hosts)
    settle(args.db)
    result: dict = {"hosts": fleet, "client": args.client, "limit": args.limit,
                    "candidate_sample": args.candidate_sample, "flavor": FLAVOR}
    with placement_server(args.db, args.placement_url if args.client == "http" else "unused",
                          args.placement_workers) as url:
        if "single" in phases:
            log(f"single: {args.single} sequential requests ({args.client})")
            result["single"] = phase_single(make_scheduler(args.client, args.db, url, args.limit, 1), args.single)
            log(f"  p50 {result['single']['p50_ms']:.1f} ms, p95 {result['single']['p95_ms']:.1f} ms")
        if "clients" in phases:
            log(f"clients: {args.clients} processes for {args.seconds:g} s")
            result["clients"] = phase_clients(args.client, args.db, url, args.limit, args.clients, args.seconds)
            log(f"  {result['clients']['instances_per_s']:.0f} instances/s "
                f"({result['clients']['placed']} placed, {result['clients']['failed']} failed)")
            log_cpu(result["clients"])
        if "service" in phases:
            log(f"service: {args.clients} HTTP clients of one scheduler service "
                f"({args.service_workers} process(es), {args.client} Placement) for {args.seconds:g} s")
            with scheduler_server(args.client, args.db, url, args.limit, args.service_workers,
                                  args.service_threads, not args.no_coalesce) as port:
                result["service"] = phase_service(port, args.clients, args.seconds, args.db)
            result["service"].update(workers=args.service_workers, coalesce=not args.no_coalesce)
            log(f"  {result['service']['instances_per_s']:.0f} instances/s "
                f"({result['service']['placed']} placed, {result['service']['failed']} failed)")
            log_cpu(result["service"])
        if "multi" in phases:
            log(f"multi: {args.multi_repeats} requests of {args.multi} instances")
            result["multi"] = phase_multi(make_scheduler(args.client, args.db, url, args.limit, 2),
                                          args.multi, args.multi_repeats)
            log(f"  p50 {result['multi']['p50_ms']:.0f} ms")
    if "verify" in phases:
        result["verify"] = phase_verify(args.db)
        log(f"verify: {result['verify']['overcommitted_pairs']} overcommitted provider/class pairs")
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
