"""Speak HTTP by hand: send exact bytes (half a request, a lying Content-Length,
a chunked body) and read what the server answers, for the serving tests."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from tests.concurrency.serve import RunningServer, clean_environ, stop, wait_until_up
from tests.support.ports import free_port


@dataclass(slots=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def json(self):
        return orjson.loads(self.body)

    @property
    def error(self) -> dict:
        """The single error of a ``{"errors": [...]}`` body, checking the format on the way."""
        assert self.headers.get("content-type", "").startswith("application/json"), self
        doc = self.json
        assert list(doc) == ["errors"] and len(doc["errors"]) == 1, doc
        err = doc["errors"][0]
        assert err["status"] == self.status and isinstance(err["title"], str) and err["detail"], err
        return err


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


_readers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def read_answer(sock: socket.socket, method: str = "GET") -> Answer:
    """Read one response. One buffered reader per socket: it reads ahead, and
    a fresh reader would lose a pipelined answer that arrived with this one."""
    if sock not in _readers:
        _readers[sock] = sock.makefile("rb")
    reader = _readers[sock]
    status_line = reader.readline(65537)
    if not status_line:
        raise http.client.RemoteDisconnected("closed without an answer")
    version, status, _ = status_line.decode("latin-1").split(" ", 2)
    assert version in ("HTTP/1.1", "HTTP/1.0"), status_line
    headers: dict[str, str] = {}
    while (line := reader.readline(65537)) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        # Strict like real clients (aiohttp refuses a repeated Content-Length).
        assert name not in headers or name not in ("content-length", "connection", "date"), (name, line)
        headers[name] = value.strip()
    if method == "HEAD" or int(status) in (204, 304) or 100 <= int(status) < 200:
        body = b""
    elif "content-length" in headers:
        body = reader.read(int(headers["content-length"]))
    else:
        body = reader.read()  # delimited by the end of the connection
    return Answer(int(status), headers, body)


def exchange(port: int, raw: bytes, *, half_close: bool = False, method: str = "GET",
             timeout: float = 10.0) -> Answer:
    """Send ``raw`` on a new connection (then optionally shut our side), read one answer."""
    with connect(port, timeout) as sock:
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        return read_answer(sock, method)


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Read to the end; True when the server closed the connection within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def child_pids(pid: int) -> set[int]:
    children: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        children.update(int(x) for x in text)
    return children


@contextmanager
def toy_server(*args: str, gate_dir: str | None = None) -> Iterator[RunningServer]:
    """``tests.serving.toy_server`` in a subprocess on a free port."""
    port = free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="toy-serve-", suffix=".log", delete=False)
    command = [sys.executable, "-m", "tests.serving.toy_server", "--port", str(port),
               "--gate-dir", gate_dir or tempfile.gettempdir(), *args]
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=clean_environ(),
                               cwd=Path(__file__).resolve().parents[2])
    server = RunningServer(f"http://127.0.0.1:{port}", process, Path(log_file.name))
    try:
        wait_until_up(server)
        yield server
    finally:
        try:
            if process.poll() is None:
                stop(server, signal.SIGTERM)
        finally:
            log_file.close()
            os.unlink(log_file.name)


def port_of(server: RunningServer) -> int:
    return int(server.url.rsplit(":", 1)[1])
