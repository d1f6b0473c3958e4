"""A distributed Billeting for end-to-end tests: every service its own
process, on PostgreSQL databases and RabbitMQ vhosts of the test's own.

    Placement (billeting serve --workers 2)
    2 x billeting scheduler serve   (RPC on the API bus, host records from the cells)
    2 x billeting super-conductor   (the super_conductor topic on the API bus)
    1 x billeting compute-api serve --conductor remote
    per cell: its database, its vhost, 1 x billeting conductor, N x billeting compute

Every process logs to a file; ``Deployment.logs()`` is attached to failure
messages. What each cell process was started with is kept (``Proc.argv``,
``Proc.env``) so a test can assert that no API database or API bus URL
reached it.
"""
from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from tests.concurrency.serve import clean_environ
from tests.support.ports import free_port
from tests.support.processes import stop_process

# Connections per engine (kept, extra under load). Every process opens one
# engine per database it uses; the API-side ones (schedulers, super
# conductors, compute API) open the API database and every cell's. With the
# deployment of the 100-server test -- Placement 2 workers x 1 engine, 5
# API-side processes x 4 engines, 8 cell processes x 1 engine -- at most
# 2*(3+3) + 20*(2+1) + 8*(1+1) = 88 connections, and in practice far fewer
# (the cell engines of API-side processes are read now and then), well within
# PostgreSQL's default 100 that other test runs share.
PLACEMENT_POOL = ("--db-pool-size", "3", "--db-max-overflow", "3")
API_POOL = ("--db-pool-size", "2", "--db-max-overflow", "1")
CELL_POOL = ("--db-pool-size", "1", "--db-max-overflow", "1")

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.90", "Accept": "application/json"}
PLACEMENT = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39", "Accept": "application/json"}


class Proc:
    """One ``billeting`` process with its log file."""

    def __init__(self, name: str, *args: str, role: str, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.role = role
        self.argv = [sys.executable, "-m", "billeting.cli", *args]
        self.env = env if env is not None else clean_environ()
        fd, path = tempfile.mkstemp(prefix=f"billeting-e2e-{name}-", suffix=".log")
        os.close(fd)
        self.log = Path(path)
        self.process: subprocess.Popen | None = None

    def start(self) -> Proc:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_for_line(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if not self.alive():
                raise AssertionError(f"{self.name} exited with {self.process.returncode}:\n{self.output()}")
            time.sleep(0.1)
        raise AssertionError(f"{self.name} did not log {text!r} within {timeout:g} s:\n{self.output()}")

    def signal_all(self, sig: int) -> None:
        """``sig`` to the process and its workers (the servers fork them)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.process.pid)], capture_output=True,
                             text=True).stdout
        for pid in [self.process.pid, *(int(p) for p in out.split())]:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """kill -9, as a crash would."""
        assert self.alive(), f"{self.name} is not running:\n{self.output()}"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.alive():
            stop_process(self.process, must_obey=False)


def http_json(base: str, method: str, path: str, body: object = None, *, headers: dict | None = None,
              timeout: float = 60.0) -> tuple[int, dict, dict]:
    """(status, body, headers) of one request on a fresh connection."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = orjson.dumps(body)
        hdrs["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (orjson.loads(raw) if raw else {}), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def wait_http(proc: Proc, url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited with {proc.process.returncode}:\n{proc.output()}")
        try:
            status, _, _ = http_json(url, "GET", "/", timeout=2)
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{proc.name} did not answer on {url} within {timeout:g} s:\n{proc.output()}")


@dataclass
class CellSetup:
    name: str
    db: str
    bus: str
    hosts: tuple[str, ...]


@dataclass
class Deployment:
    placement_db: str
    api_db: str
    api_bus: str
    cell0_db: str
    cells: list[CellSetup]
    workdir: Path
    procs: dict[str, Proc] = field(default_factory=dict)
    placement_url: str = ""
    api_url: str = ""
    # How long a process may take to start (a loaded machine needs more:
    # BILLETING_E2E_STARTUP_TIMEOUT seconds).
    startup_timeout: float = field(default_factory=lambda: float(os.environ.get("BILLETING_E2E_STARTUP_TIMEOUT", "60")))

    # --- starting ---------------------------------------------------------------------

    def add(self, proc: Proc) -> Proc:
        old = self.procs.get(proc.name)
        if old is not None:
            # A restart: keep the dead one's log under another name for the failure message.
            self.procs[f"{proc.name}#{len([n for n in self.procs if n.startswith(proc.name + '#')]) + 1}"] = old
        self.procs[proc.name] = proc
        return proc.start()

    def register(self) -> None:
        """Schemas, cell mappings and the image, with the one-shot commands a user would run."""
        from billeting.cli import main

        run = [["db", "upgrade", "--db", self.placement_db],
               ["compute-api", "cell", "add", "cell0", "--db", self.api_db, "--cell-db", self.cell0_db]]
        for cell in self.cells:
            run.append(["compute-api", "cell", "add", cell.name, "--db", self.api_db, "--cell-db", cell.db,
                        "--transport-url", cell.bus])
        run.append(["compute-api", "image", "add", "cirros", "--db", self.api_db])
        for argv in run:
            assert main(argv) == 0, argv

    def start_placement(self) -> None:
        port = free_port()
        self.placement_url = f"http://127.0.0.1:{port}"
        proc = self.add(Proc("placement", "serve", "--host", "127.0.0.1", "--port", str(port), "--db",
                             self.placement_db, "--workers", "2", *PLACEMENT_POOL, role="api"))
        wait_http(proc, self.placement_url, self.startup_timeout)

    def cell_args(self, cell: CellSetup) -> tuple[str, ...]:
        return ("--cell", cell.name, "--cell-db", cell.db, "--transport-url", cell.bus,
                "--placement-url", self.placement_url)

    def start_conductor(self, cell: CellSetup, *, sweep: float = 1.0, down_after: float = 3.0,
                        reschedule_timeout: float = 5.0, wait: bool = True) -> Proc:
        proc = self.add(Proc(f"conductor-{cell.name}", "conductor", "--sweep-interval", str(sweep),
                             "--service-down-time", str(down_after), "--reschedule-timeout",
                             str(reschedule_timeout), "--cast-timeout", "10", *self.cell_args(cell), *CELL_POOL,
                             role="cell"))
        if wait:
            proc.wait_for_line(f"serving cell {cell.name}", self.startup_timeout)
        return proc

    def start_compute(self, cell: CellSetup, host: str, *, build_time: float, failure_rate: float,
                      memory_mb: int = 32768, wait: bool = True) -> Proc:
        proc = self.add(Proc(f"compute-{host}", "compute", "--host", host, "--driver", "fake", "--vcpus", "16",
                             "--memory-mb", str(memory_mb), "--disk-gb", "500", "--build-time", str(build_time),
                             "--failure-rate", str(failure_rate), "--report-interval", "0.5",
                             *self.cell_args(cell), *CELL_POOL, role="cell"))
        if wait:
            proc.wait_for_line(f"compute {host} serving", self.startup_timeout)
        return proc

    def start_control_plane(self, *, schedulers: int = 2, super_conductors: int = 2) -> None:
        config = self.workdir / "scheduler.conf"
        # Host records (up/down, failed builds) re-read every 2 s instead of 60.
        config.write_text("[scheduler]\ncatalog_refresh_s = 2\nservice_down_time = 3\n")
        started = []
        for i in range(schedulers):
            port = free_port()
            proc = self.add(Proc(f"scheduler-{i + 1}", "scheduler", "serve", "--host", "127.0.0.1", "--port",
                                 str(port), "--config-file", str(config), "--db", self.api_db,
                                 "--placement-url", self.placement_url, "--transport-url", self.api_bus,
                                 *API_POOL, role="api"))
            started.append((proc, f"http://127.0.0.1:{port}"))
        for i in range(super_conductors):
            self.start_super_conductor(i + 1, wait=False)
        port = free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        api = self.add(Proc("compute-api", "compute-api", "serve", "--host", "127.0.0.1", "--port", str(port),
                            "--threads", "8", "--db", self.api_db, "--placement-url", self.placement_url,
                            "--transport-url", self.api_bus, "--conductor", "remote", *API_POOL, role="api"))
        for proc, url in started:
            wait_http(proc, url, self.startup_timeout)
            proc.wait_for_line("serving the scheduler topic", self.startup_timeout)
        for i in range(super_conductors):
            self.procs[f"super-conductor-{i + 1}"].wait_for_line("super conductor serving", self.startup_timeout)
        wait_http(api, self.api_url, self.startup_timeout)

    def start_super_conductor(self, number: int, *, wait: bool = True) -> Proc:
        proc = self.add(Proc(f"super-conductor-{number}", "super-conductor", "--db", self.api_db, "--transport-url",
                             self.api_bus, "--placement-url", self.placement_url, *API_POOL, role="api"))
        if wait:
            proc.wait_for_line("super conductor serving", self.startup_timeout)
        return proc

    # --- using ------------------------------------------------------------------------

    def api(self, method: str, path: str, body: object = None) -> tuple[int, dict, dict]:
        return http_json(self.api_url, method, path, body, headers=ADMIN)

    def placement(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        status, data, _ = http_json(self.placement_url, method, path, body, headers=PLACEMENT)
        return status, data

    def usages(self) -> dict[str, dict[str, int]]:
        """Provider name -> its non-zero usages."""
        status, data = self.placement("GET", "/resource_providers")
        assert status == 200, data
        found = {}
        for rp in data["resource_providers"]:
            status, used = self.placement("GET", f"/resource_providers/{rp['uuid']}/usages")
            assert status == 200, used
            found[rp["name"]] = {rc: n for rc, n in used["usages"].items() if n}
        return found

    def logs(self, roles: tuple[str, ...] = ("api", "cell")) -> str:
        parts = []
        for name, proc in self.procs.items():
            if proc.role in roles:
                state = "running" if proc.alive() else f"exited {proc.process.returncode}"
                parts.append(f"===== {name} ({state}) =====\n{proc.output()[-6000:]}")
        return "\n".join(parts)

    def wait(self, predicate: Callable[[], object], *, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate()
            if found:
                return found
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{self.logs()}")

    def count_connections(self) -> "ConnectionCounter":
        """Samples (every 0.5 s, in a thread) how many connections the
        deployment's databases have; ``.peak`` once stopped."""
        return ConnectionCounter([self.placement_db, self.api_db, self.cell0_db, *(c.db for c in self.cells)])

    def stop(self) -> None:
        # Cells first (they report to Placement), then the control plane, Placement last.
        order = sorted(self.procs.values(), key=lambda p: {"cell": 0, "api": 1}[p.role] + (p.name == "placement"))
        for proc in order:
            proc.stop()
        for proc in self.procs.values():
            proc.log.unlink(missing_ok=True)


class ConnectionCounter:
    def __init__(self, urls: list[str]) -> None:
        import threading

        self.names = [u.rsplit("/", 1)[1] for u in urls]
        self.admin = urls[0].rsplit("/", 1)[0].replace("+psycopg", "") + "/postgres"
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConnectionCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            while not self._stop.wait(0.5):
                (n,) = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = ANY(%s)",
                                    (self.names,)).fetchone()
                self.peak = max(self.peak, n)
