"""Run a real ``billeting serve`` in a subprocess for multi-process tests.

    with running_server(db_url, workers=3) as server:
        status, body = http_json("GET", server.url + "/")

The server gets a free port, its own environment without ``BILLETING_*``
leaking in from the developer's shell, and a log file that is attached to
the failure message when it does not come up or does not stop.
"""
from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson
from tests.support.ports import free_port
from tests.support.processes import stop_process

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def clean_environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BILLETING_")}
    env.update(extra)
    return env


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "billeting.cli", "serve", *args]


@dataclass(slots=True)
class RunningServer:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class Http:
    """One keep-alive connection speaking JSON, as a Placement client would."""

    def __init__(self, base_url: str, token: str = "admin", mv: str = "1.39") -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.token, self.mv = token, mv
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def request(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        headers = {"X-Auth-Token": self.token, "OpenStack-API-Version": f"placement {self.mv}",
                   "Accept": "application/json"}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                return resp.status, (orjson.loads(raw) if raw else {})
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The server closed an idle keep-alive connection before we
                # sent anything on it; reconnect once.
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def wait_until_up(server: RunningServer, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    parts = urlsplit(server.url)
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"billeting serve exited with {server.process.returncode}:\n{server.log()}")
        try:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
            conn.request("GET", "/")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"billeting serve did not answer within {timeout}s:\n{server.log()}")


def stop(server: RunningServer, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
    """Signal the server and wait for it; returns its exit status."""
    return stop_process(server.process, sig, timeout=timeout, what="billeting serve", output=server.log)


@contextmanager
def running_server(db_url: str, *, workers: int = 3, args: tuple[str, ...] = (),
                   env: dict[str, str] | None = None) -> Iterator[RunningServer]:
    port = free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="billeting-serve-", suffix=".log", delete=False)
    command = serve_command("--host", "127.0.0.1", "--port", str(port), "--db", db_url,
                            "--workers", str(workers), *args)
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                               env=env or clean_environ())
    server = RunningServer(f"http://127.0.0.1:{port}", process, Path(log_file.name))
    try:
        wait_until_up(server)
        yield server
    finally:
        try:
            if process.poll() is None:
                stop(server)
        finally:
            log_file.close()
            os.unlink(log_file.name)
