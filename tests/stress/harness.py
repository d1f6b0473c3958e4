"""A real multi-process server for stress tests, and an HTTP client that
records every exchange.

The server is ``billeting serve`` in a subprocess of its own session, on a
free 127.0.0.1 port; it is always stopped by the context manager, and its
log goes to a file so a failing test can show the tail.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from tests.support.ports import free_port
from tests.support.processes import stop_process

HOST = "127.0.0.1"
ADMIN_TOKEN = "admin"


def _serve_command() -> list[str]:
    script = Path(sys.executable).with_name("billeting")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "billeting.cli"]


class ServerError(RuntimeError):
    pass


class PlacementServer:
    """``billeting serve --workers N`` against ``db_url``; use as a context manager."""

    def __init__(self, db_url: str, *, workers: int, log_path: Path,
                 start_timeout_s: float = 45.0) -> None:
        self.db_url = db_url
        self.workers = workers
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> PlacementServer:
        # A port picked here can in theory be taken before the server binds
        # it; serve then exits at once and we try another.
        for _attempt in range(3):
            self.port = free_port()
            self._start()
            if self._wait_ready():
                return self
            if self._proc.poll() is None:
                break  # running but not answering: no point in another port
        self.stop()
        raise ServerError(f"server did not become ready; log tail:\n{self.log_tail()}")

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BILLETING_")}
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [*_serve_command(), "serve", "--host", HOST, "--port", str(self.port),
             "--workers", str(self.workers), "--db", self.db_url, "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)  # its own process group: the workers die with it

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
                conn.request("GET", "/")
                ready = conn.getresponse().status == 200
                conn.close()
                if ready:
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # SIGINT is gunicorn's quick shutdown; the group kill is the backstop
            # for workers that outlive their master.
            stop_process(proc, signal.SIGINT, timeout=15, must_obey=False)
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


# --- client -------------------------------------------------------------------

@dataclass(slots=True)
class Exchange:
    """One request and its answer, as the client saw it."""

    client: int
    op: str
    method: str
    path: str
    body: object
    status: int = 0  # 0: no HTTP answer (transport failure)
    reply: object = None
    transport_error: str | None = None
    started: float = 0.0
    finished: float = 0.0

    @property
    def error(self) -> dict:
        if isinstance(self.reply, dict) and self.reply.get("errors"):
            return self.reply["errors"][0]
        return {}


@dataclass
class Journal:
    """Every exchange of every client, in completion order."""

    exchanges: list[Exchange] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)


class ApiClient:
    """One keep-alive connection; not shared between threads."""

    def __init__(self, port: int, journal: Journal, *, client_id: int, mv: str = "1.38") -> None:
        self.port = port
        self.journal = journal
        self.client_id = client_id
        self.mv = mv
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: object = None, *, op: str = "",
                mv: str | None = None) -> Exchange:
        exchange = Exchange(self.client_id, op or method, method, path, body)
        headers = {"X-Auth-Token": ADMIN_TOKEN, "Accept": "application/json",
                   "OpenStack-API-Version": f"placement {mv or self.mv}"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        exchange.started = time.monotonic()
        # A GET may be repeated on a fresh connection (the server may have
        # closed an idle keep-alive one). A write whose answer was lost has an
        # unknown outcome: the test counts it as a failure rather than guess.
        for _attempt in range(2 if method == "GET" else 1):
            try:
                self._send(exchange, method, path, payload, headers)
                exchange.transport_error = None
                break
            except (OSError, http.client.HTTPException) as exc:
                exchange.transport_error = f"{type(exc).__name__}: {exc}"
                self.close()
        exchange.finished = time.monotonic()
        self.journal.add(exchange)
        return exchange

    def _send(self, exchange: Exchange, method: str, path: str, payload: bytes | None,
              headers: dict[str, str]) -> None:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
        self._conn.request(method, path, body=payload, headers=headers)
        response = self._conn.getresponse()
        raw = response.read()
        exchange.status = response.status
        if raw:
            try:
                exchange.reply = json.loads(raw)
            except ValueError:
                exchange.reply = raw.decode(errors="replace")
        if response.will_close:
            self.close()
