#!/usr/bin/env python3
"""The benchmark targets BENCHMARKS.md states, each measured by one function.

``benchmarks/run TARGET [TARGET ...]`` runs each target's benchmark
``--runs`` times (medians are what the tables state), measures its reference
in the same sitting, alternating with it, and prints one Markdown table per
target: figure, target, Billeting's median (the runs in brackets), the
reference's median, their ratio and whether the target is met. ``--json
FILE`` keeps every run's raw figures as well.

Targets (``benchmarks/run --list``):

  scheduler       select + claim at 5,000 hosts on PostgreSQL; reference:
                  the same scheduler asking for every candidate
                  (``candidate_sample = all``)
  scheduler-cpu   PostgreSQL CPU per placed instance with 1 and 8 clients
  scheduler-100k  single-instance latency at 100,000 hosts (loads for minutes)
  simulator       ``scale-5k`` per design, sampled and every-candidate designs
  listing         ``GET /servers/detail`` over 100,000 servers in 4 cells
  placement       Placement's own targets beside an upstream Placement URL
                  (``--upstream-url``), through an HTTP-only perf client
                  (``--perf-client``)
  first-start     ``./dev.sh up`` on a fresh clone until the API answers

Everything runs from this checkout's ``.venv``; database targets use the
PostgreSQL server of ``--pg`` (the local one by default) and make their own
databases, named ``bench_*``, which later runs reuse (a loaded fleet is a
template; every run works on a fresh copy of it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432"


def log(msg: str) -> None:
    print(f"benchmarks: {msg}", file=sys.stderr, flush=True)


# --- figures and tables ------------------------------------------------------------

@dataclass(frozen=True)
class Goal:
    """What a figure must reach: ``at_most``/``at_least`` an absolute value,
    or a ``ratio`` to the reference (Billeting ÷ reference) of at least /
    at most that."""
    text: str
    at_most: float | None = None
    at_least: float | None = None
    ratio_at_least: float | None = None
    ratio_at_most: float | None = None

    def met(self, value: float, reference: float | None) -> bool | None:
        if self.at_most is not None and value > self.at_most:
            return False
        if self.at_least is not None and value < self.at_least:
            return False
        if self.ratio_at_least is not None or self.ratio_at_most is not None:
            if not reference:
                return None
            ratio = value / reference
            if self.ratio_at_least is not None and ratio < self.ratio_at_least:
                return False
            if self.ratio_at_most is not None and ratio > self.ratio_at_most:
                return False
        return True


NO_GOAL = Goal("–")


@dataclass
class Figure:
    name: str
    unit: str
    goal: Goal = NO_GOAL
    runs: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs else None

    @property
    def reference_median(self) -> float | None:
        return statistics.median(self.reference) if self.reference else None


@dataclass
class Table:
    target: str
    title: str
    setup: str
    reference_name: str
    figures: list[Figure]
    notes: list[str] = field(default_factory=list)

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def with_runs(median: float | None, runs: list[float], unit: str) -> str:
    if median is None:
        return "–"
    inner = ", ".join(number(v) for v in runs)
    return f"{number(median, unit)} ({inner})" if len(runs) > 1 else number(median, unit)


def render(table: Table, when: str, machine: str) -> str:
    lines = [f"### {table.title}", "",
             f"`benchmarks/run {table.target}` — {when}, {machine}. {table.setup}", "",
             f"| figure | target | Billeting, median (runs) | {table.reference_name} | ratio | met |",
             "| --- | --- | --- | --- | --- | --- |"]
    for f in table.figures:
        ref = f.reference_median
        ratio = f"{f.median / ref:.2f}×" if f.median is not None and ref else "–"
        verdict = f.goal.met(f.median, ref) if f.median is not None and f.goal is not NO_GOAL else None
        met = {True: "**yes**", False: "**no**", None: "–"}[verdict]
        lines.append(f"| {f.name} | {f.goal.text} | {with_runs(f.median, f.runs, f.unit)} | "
                     f"{with_runs(ref, f.reference, f.unit)} | {ratio} | {met} |")
    lines.extend(["", *table.notes] if table.notes else [])
    return "\n".join(lines) + "\n"


def machine_line() -> str:
    """Cores, CPU model and a single-thread speed probe: figures move with
    the machine, and this says which machine a table came from."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    loop = time.perf_counter() - started
    return f"{os.cpu_count()} cores ({model}), Python loop of 10⁷ additions {loop:.2f} s"


# --- helpers -----------------------------------------------------------------------

def run_json(argv: list[str], *, env: dict | None = None, timeout: float = 3600) -> dict:
    """Run a benchmark script that prints one JSON object on stdout (its
    progress goes to our stderr)."""
    log("$ " + " ".join(argv))
    done = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, env={**os.environ, **(env or {})},
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmarks: {argv[1]} exited {done.returncode}")
    return json.loads(done.stdout)


class Postgres:
    """Bench databases on one PostgreSQL server: a loaded fleet is kept as
    a template and every run gets a fresh copy, so one run's allocations do
    not slow the next."""

    def __init__(self, server: str, prefix: str = "bench") -> None:
        from sqlalchemy import create_engine

        self.prefix = prefix
        self.server = server.rstrip("/")
        self.admin = create_engine(f"{self.server}/postgres", isolation_level="AUTOCOMMIT")

    def url(self, name: str) -> str:
        return f"{self.server}/{self.name(name)}"

    def name(self, name: str) -> str:
        """Every database of a run is named ``<prefix>_<what>``."""
        return f"{self.prefix}_{name}"

    def exists(self, name: str) -> bool:
        from sqlalchemy import text

        with self.admin.connect() as conn:
            return conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"),
                                {"n": self.name(name)}).first() is not None

    def create(self, name: str, template: str | None = None) -> str:
        from sqlalchemy import text

        self.drop(name)
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.name(name)}"'
                              + (f' TEMPLATE "{self.name(template)}"' if template else "")))
        return self.url(name)

    def drop(self, name: str) -> None:
        from sqlalchemy import text

        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.name(name)}" WITH (FORCE)'))

    def drop_all(self) -> None:
        """Every database of this prefix, templates included."""
        from sqlalchemy import text

        with self.admin.connect() as conn:
            names = conn.execute(text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                                 {"p": f"{self.prefix}\\_%"}).scalars().all()
        for name in names:
            self.drop(name[len(self.prefix) + 1:])


def scheduler_bench(db: str, *args: str, sample: str = "adaptive", timeout: float = 3600) -> dict:
    return run_json([PYTHON, "benchmarks/scheduler_bench.py", "--db", db, "--candidate-sample", sample, *args],
                    timeout=timeout)


# Instances the template places once its fleet is loaded: a tenth of the
# fleet's room (32 per host), at most 2,000. Bounded, so that a small test
# fleet keeps room for the runs that copy it.
PLACED_SHARE, PLACED_MAX = 0.1, 2000


def placed_in_template(hosts: int) -> int:
    return max(1, min(PLACED_MAX, int(hosts * 32 * PLACED_SHARE)))


def fleet_template(pg: Postgres, hosts: int) -> str:
    """A database holding a loaded fleet of ``hosts`` flat hosts that has
    placed ``placed_in_template(hosts)`` instances, one at a time, then been
    vacuumed and analyzed. With an allocations table that was empty when
    analyzed, PostgreSQL's planner scans it whole for every claim's key
    checks: thousands of rows read per decision, a figure of the benchmark,
    not of the scheduler."""
    placed = placed_in_template(hosts)
    name = f"fleet_{hosts}_placed_{placed}"
    if not pg.exists(name):
        log(f"loading a fleet of {hosts} hosts into {name}, placing {placed} instances "
            "(once; later runs copy it)")
        pg.create(name)
        scheduler_bench(pg.url(name), "--hosts", str(hosts), "--client", "inprocess", "--phases", "single,verify",
                        "--single", str(placed), timeout=7200)
    return name


def alternate(runs: int, *measures: Callable[[int], None]) -> None:
    """Run each measure ``runs`` times, alternating between them, so that a
    machine that speeds up or slows down during the sitting moves them alike."""
    for i in range(runs):
        for measure in measures:
            measure(i)


# --- targets -----------------------------------------------------------------------

def target_scheduler(opts: argparse.Namespace) -> Table:
    """select + claim at 5,000 hosts (PostgreSQL), beside candidate_sample = all"""
    pg = Postgres(opts.pg, opts.db_prefix)
    template = fleet_template(pg, opts.hosts)
    service = Figure("HTTP service, 8 clients, 2 workers", "instances/s",
                     Goal("≥ 2× reference on 2 cores", ratio_at_least=2.0))
    rows_http = Figure("rows read per placed instance, HTTP 8 clients", "rows", Goal("≤ 100", at_most=100))
    rows_inproc = Figure("rows read per placed instance, in-process 4 clients", "rows", Goal("≤ 100", at_most=100))
    single = Figure("single-instance p50 (HTTP Placement)", "ms", Goal("≤ 15 ms", at_most=15))
    multi = Figure("one 50-instance request, p50", "ms", Goal("≤ 250 ms", at_most=250))
    over = Figure("overcommitted provider/class pairs", "", Goal("0", at_most=0))
    seconds = str(opts.seconds)

    def measure(sample: str) -> Callable[[int], None]:
        def one(i: int) -> None:
            side = "runs" if sample != "all" else "reference"
            db = pg.create(f"sched_{sample}", template)
            out = scheduler_bench(db, "--hosts", str(opts.hosts), "--client", "http",
                                  "--phases", "service,single,multi,verify", "--clients", "8",
                                  "--service-workers", "2", "--seconds", seconds, "--single", "200",
                                  "--multi-repeats", "5", sample=sample)
            getattr(service, side).append(out["service"]["instances_per_s"])
            getattr(rows_http, side).append(out["service"]["db_rows_per_instance"])
            getattr(single, side).append(out["single"]["p50_ms"])
            getattr(multi, side).append(out["multi"]["p50_ms"])
            getattr(over, side).append(out["verify"]["overcommitted_pairs"])
            db = pg.create(f"sched_{sample}", template)
            out = scheduler_bench(db, "--hosts", str(opts.hosts), "--client", "inprocess",
                                  "--phases", "clients", "--clients", "4", "--seconds", seconds, sample=sample)
            getattr(rows_inproc, side).append(out["clients"]["db_rows_per_instance"])
            pg.drop(f"sched_{sample}")
        return one

    alternate(opts.runs, measure("adaptive"), measure("all"))
    return Table("scheduler", f"Scheduler: select + claim at {opts.hosts:,} hosts",
                 f"PostgreSQL, {opts.hosts:,} flat hosts, a fresh copy of one loaded fleet per run, "
                 f"{opts.seconds:g} s concurrent phases. Rows read: PostgreSQL `tup_returned + tup_fetched` "
                 "of the phase ÷ instances placed (machine-independent).",
                 "reference: `candidate_sample = all`",
                 [service, rows_http, rows_inproc, single, multi, over])


def target_scheduler_cpu(opts: argparse.Namespace) -> Table:
    """PostgreSQL CPU per placed instance, 1 client against 8, beside the
    database work per instance (buffer pages touched), which does not depend
    on how busy the machine is: CPU that rises while the work stays flat is
    each page getting dearer on a machine whose cores are all taken. The
    clients' own CPU per instance, for the same fixed work, shows how much
    dearer the machine made it."""
    pg = Postgres(opts.pg, opts.db_prefix)
    template = fleet_template(pg, opts.hosts)
    one = Figure("PostgreSQL CPU per placed instance, 1 client (reference: the same)", "ms")
    eight = Figure("PostgreSQL CPU per placed instance, 8 clients (reference: 1 client)", "ms",
                   Goal("within ±25 % of 1 client", ratio_at_least=0.75, ratio_at_most=1.25))
    pages_one = Figure("buffer pages touched per placed instance, 1 client (reference: the same)", "")
    pages_eight = Figure("buffer pages touched per placed instance, 8 clients (reference: 1 client)", "")
    price_one = Figure("PostgreSQL CPU per 1,000 pages touched, 1 client (reference: the same)", "ms")
    price_eight = Figure("PostgreSQL CPU per 1,000 pages touched, 8 clients (reference: 1 client)", "ms")
    # The control: the scheduler clients run the same Python per decision
    # however many run, so what their CPU per instance does is the machine's.
    clients_one = Figure("scheduler clients' CPU per placed instance, 1 client (reference: the same)", "ms")
    clients_eight = Figure("scheduler clients' CPU per placed instance, 8 clients (reference: 1 client)", "ms")

    def measure(clients: int, cpu: Figure, pages: Figure, price: Figure, control: Figure) -> Callable[[int], None]:
        def run(i: int) -> None:
            db = pg.create("sched_cpu", template)
            out = scheduler_bench(db, "--hosts", str(opts.hosts), "--client", "inprocess", "--phases", "clients",
                                  "--clients", str(clients), "--seconds", str(opts.seconds))["clients"]
            ms, touched = out["cpu_ms_per_instance"]["postgresql"], out["db_pages_per_instance"]
            cpu.runs.append(ms)
            pages.runs.append(touched)
            price.runs.append(1000 * ms / max(touched, 1e-9))
            control.runs.append(out["cpu_ms_per_instance"]["bench"])
        return run

    alternate(opts.runs, measure(1, one, pages_one, price_one, clients_one),
              measure(8, eight, pages_eight, price_eight, clients_eight))
    pairs = ((one, eight), (pages_one, pages_eight), (price_one, price_eight), (clients_one, clients_eight))
    for first, second in pairs:
        first.reference = second.reference = list(first.runs)
    pg.drop("sched_cpu")
    return Table("scheduler-cpu", "Scheduler: database work per decision as clients are added",
                 f"In-process scheduler, PostgreSQL on the same machine, {opts.hosts:,} hosts.",
                 "reference", [one, eight, pages_one, pages_eight, price_one, price_eight,
                               clients_one, clients_eight])


def target_scheduler_100k(opts: argparse.Namespace) -> Table:
    """single-instance latency at 100,000 hosts (loads for minutes the first time)"""
    pg = Postgres(opts.pg, opts.db_prefix)
    template = fleet_template(pg, 100_000)
    single = Figure("single-instance p50, in-process", "ms", Goal("≤ 15 ms", at_most=15))

    def measure(sample: str) -> Callable[[int], None]:
        def run(i: int) -> None:
            db = pg.create("sched_100k", template)
            out = scheduler_bench(db, "--hosts", "100000", "--client", "inprocess", "--phases", "single",
                                  "--single", "200", sample=sample)
            (single.runs if sample != "all" else single.reference).append(out["single"]["p50_ms"])
        return run

    alternate(opts.runs, measure("adaptive"), measure("all"))
    pg.drop("sched_100k")
    return Table("scheduler-100k", "Scheduler: one decision at 100,000 hosts",
                 "PostgreSQL, 100,000 flat hosts, 200 sequential requests per run.",
                 "reference: `candidate_sample = all`", [single])


def _cpu_seconds_of_children() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def target_simulator(opts: argparse.Namespace) -> Table:
    """scale-5k per design: wall and CPU time"""
    figures: dict[str, tuple[Figure, Figure]] = {}
    designs = opts.designs.split(",")
    for design in designs:
        figures[design] = (Figure(f"`{design}`: wall time", "min", Goal("≤ 2 min", at_most=2)),
                           Figure(f"`{design}`: CPU time", "min"))

    def measure(design: str) -> Callable[[int], None]:
        def run(i: int) -> None:
            with tempfile.TemporaryDirectory() as out:
                cpu = _cpu_seconds_of_children()
                started = time.monotonic()
                argv = [str(REPO / ".venv" / "bin" / "billeting"), "simulate", opts.scenario, "--designs", design,
                        "--no-html", "--quiet", "--out", out]
                log("$ " + " ".join(argv))
                subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
                wall, used = figures[design]
                wall.runs.append((time.monotonic() - started) / 60)
                used.runs.append((_cpu_seconds_of_children() - cpu) / 60)
        return run

    alternate(opts.runs, *(measure(d) for d in designs))
    return Table("simulator", f"Simulator: `{Path(opts.scenario).stem}` per design",
                 f"`billeting simulate {opts.scenario} --designs D --no-html`, one design at a time.",
                 "reference", [f for pair in figures.values() for f in pair])


def target_listing(opts: argparse.Namespace) -> Table:
    """GET /servers and /servers/detail over 100,000 servers in 4 cells"""
    figures: dict[str, Figure] = {}
    for i in range(opts.runs):
        # (its databases are kept between runs: the 100,000 rows load once)
        out = run_json([PYTHON, "benchmarks/listing_bench.py", "--server", opts.pg, "--prefix",
                        f"{opts.db_prefix}_listing"])
        for result in out["results"]:
            name = f"`{result['path'].removeprefix('/v2.1')}`, {result['case']} page"
            figures.setdefault(name, Figure(name, "ms", Goal("≤ 50 ms", at_most=50))).runs.append(result["p50_ms"])
    return Table("listing", "Compute API: listing servers across cells",
                 "PostgreSQL, 100,000 servers over 4 cells (rows written directly), limit 1,000, in-process "
                 "through the compute API's WSGI app; p50 of each run's requests. first: newest first; deep: "
                 "a marker 90 % into the listing; project: one project's servers.",
                 "reference", list(figures.values()))


def target_placement(opts: argparse.Namespace) -> Table:
    """Placement's targets, beside an upstream Placement (--perf-client, --upstream-url)"""
    if not opts.perf_client or not Path(opts.perf_client).exists():
        raise SystemExit("benchmarks: placement needs --perf-client PATH (an HTTP-only Placement perf client "
                         "that prints JSON, e.g. the one beside the upstream installer)")
    pg = Postgres(opts.pg, opts.db_prefix)
    perf = [PYTHON, opts.perf_client]
    shapes = {"load": ("load, providers/s", "providers/s", Goal("≥ 300", at_least=300)),
              "claims": ("claim cycle at c=10, claims/s", "claims/s", Goal("≥ 300", at_least=300)),
              "ac_full": ("full answer, sequential p50", "ms", Goal("≥ 10× quicker than reference",
                                                                     ratio_at_most=0.1)),
              "ac_limit": ("`limit=10`, sequential p50", "ms", Goal("≤ 5 ms", at_most=5))}
    figures = {key: Figure(*shape) for key, shape in shapes.items()}

    # where each figure sits in the perf client's JSON
    paths = {"load": ("load", "providers_per_s"), "claims": ("claims", "claims_ok_per_s"),
             "ac_full": ("ac_full", "sequential", "p50_ms"), "ac_limit": ("ac_limit", "sequential", "p50_ms")}

    def pick(result: dict, side: str) -> None:
        for key, fig in figures.items():
            value = result
            for step in paths[key]:
                value = value.get(step) if isinstance(value, dict) else None
            if isinstance(value, (int, float)):
                getattr(fig, side).append(float(value))

    def billeting(i: int) -> None:
        db = pg.create("placement")
        port = _free_port()
        server = subprocess.Popen([str(REPO / ".venv" / "bin" / "billeting"), "serve", "--db", db, "--port",
                                   str(port), "--workers", "2", "--auto-upgrade", "--log-level", "WARNING"],
                                  cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL)
        try:
            _wait_http(f"http://127.0.0.1:{port}/")
            pick(run_json([*perf, "--url", f"http://127.0.0.1:{port}", "--providers", str(opts.providers)]), "runs")
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(30)
            pg.drop("placement")

    def upstream(i: int) -> None:
        if opts.upstream_url:
            pick(run_json([*perf, "--url", opts.upstream_url, "--providers", str(opts.providers),
                           "--phases", "ac", "--allow-existing"]), "reference")

    alternate(opts.runs, billeting, upstream)
    return Table("placement", f"Placement: {opts.providers:,} flat providers",
                 "`billeting serve --workers 2` on a fresh PostgreSQL database per run, loaded and measured "
                 "by the perf client's default phases.",
                 "reference: upstream Placement at --upstream-url", list(figures.values()))


def target_first_start(opts: argparse.Namespace) -> Table:
    """./dev.sh up on a fresh clone until Placement answers"""
    first = Figure("`./dev.sh up` on a fresh clone until Placement answers (warm package cache)", "s",
                   Goal("≤ 60 s", at_most=60))
    for i in range(opts.runs):
        with tempfile.TemporaryDirectory() as tmp:
            clone = Path(tmp) / "billeting"
            subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
            base = _free_port_base(6)  # billeting up listens on base .. base + 5
            port = base + 4            # Placement's
            # the user's package caches stay (a warm cache is the target's premise);
            # billeting up's state goes to the temporary directory
            env = {**os.environ, **{v: tmp for v in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")}}
            started = time.monotonic()
            proc = subprocess.Popen(["./dev.sh", "up", "--port-base", str(base)], cwd=clone, env=env,
                                    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                _wait_http(f"http://127.0.0.1:{port}/", timeout=600, proc=proc)
                first.runs.append(time.monotonic() - started)
            finally:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    return Table("first-start", "First start", "A fresh clone of this checkout, its own `.venv`, the user's package cache.",
                 "reference", [first])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_port_base(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    for _ in range(100):
        first = _free_port()
        if first + count > 65535:
            continue
        try:
            held = []
            for port in range(first, first + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise SystemExit("benchmarks: no run of free ports")


def _wait_http(url: str, timeout: float = 120, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"benchmarks: the process serving {url} exited {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"benchmarks: {url} did not answer within {timeout:.0f} s")


TARGETS: dict[str, Callable[[argparse.Namespace], Table]] = {
    "scheduler": target_scheduler,
    "scheduler-cpu": target_scheduler_cpu,
    "scheduler-100k": target_scheduler_100k,
    "simulator": target_simulator,
    "listing": target_listing,
    "placement": target_placement,
    "first-start": target_first_start,
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="benchmarks/run", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("targets", nargs="*", metavar="TARGET", help="what to measure (see --list)")
    ap.add_argument("--list", action="store_true", help="name the targets and stop")
    ap.add_argument("--runs", type=int, default=3, help="runs per side; medians are reported (default 3)")
    ap.add_argument("--pg", default=DEFAULT_PG, help=f"PostgreSQL server URL, no database (default {DEFAULT_PG})")
    ap.add_argument("--db-prefix", default="bench", help="names of the databases made (default bench_*)")
    ap.add_argument("--hosts", type=int, default=5000, help="scheduler fleet size (default 5000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each concurrent phase (default 10)")
    ap.add_argument("--scenario", default="scenarios/scale-5k.toml", help="simulator scenario")
    ap.add_argument("--designs", default="scheduler-claims,scheduler-claims-all",
                    help="simulator designs, comma-separated")
    ap.add_argument("--providers", type=int, default=1000, help="placement fleet size (default 1000)")
    ap.add_argument("--perf-client", default=None, help="placement: path of the HTTP-only perf client")
    ap.add_argument("--upstream-url", default=None, help="placement: a loaded upstream Placement to compare with")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write every run's figures to FILE")
    return ap


def main(argv: list[str] | None = None) -> int:
    opts = parser().parse_args(argv)
    if opts.list or not opts.targets:
        for name, fn in TARGETS.items():
            print(f"{name:16} {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0 if opts.list else 2
    unknown = [t for t in opts.targets if t not in TARGETS]
    if unknown:
        print(f"benchmarks/run: unknown target {', '.join(unknown)} (try --list)", file=sys.stderr)
        return 2
    if opts.runs < 1:
        print("benchmarks/run: --runs must be at least 1", file=sys.stderr)
        return 2
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = machine_line()
    tables = []
    for name in opts.targets:
        log(f"target {name}: {opts.runs} run(s) per side")
        table = TARGETS[name](opts)
        tables.append(table)
        print(render(table, when, machine), flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(
            {"when": when, "machine": machine,
             "tables": [{"target": t.target, "figures": [
                 {"name": f.name, "unit": f.unit, "goal": f.goal.text, "runs": f.runs, "reference": f.reference}
                 for f in t.figures]} for t in tables]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
