"""Start, await and stop the Keystone child of ``billeting up``.

Keystone takes seconds to bootstrap (its schema, keys, the admin user and
the catalog), so ``start`` only launches it; the rest of the all-in-one
starts meanwhile and ``wait_ready`` collects it. The child reads its stdin
until EOF: however this process ends, even by SIGKILL, the pipe closes and
Keystone exits with it. Its log goes to ``identity/keystone.log``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from billeting.identity.keystone_server import PASSWORD_ENV
from billeting.identity.layout import REGION, Endpoints, IdentityLayout

LOG_NAME = "keystone.log"
READY_TIMEOUT_S = 120.0


class IdentityFailed(RuntimeError):
    """Keystone did not come up; the message ends with its last log lines."""


class KeystoneProcess:
    def __init__(self, layout: IdentityLayout, endpoints: Endpoints) -> None:
        self.layout = layout
        log = open(layout.root / LOG_NAME, "ab")  # noqa: SIM115 - the child keeps it
        args = [sys.executable, "-m", "billeting.identity.keystone_server",
                "--config-file", str(layout.keystone_conf), "--host", layout.host, "--port", str(layout.port),
                "--public-url", layout.auth_url, "--region", REGION, "--compute-url", endpoints.compute,
                "--placement-url", endpoints.placement, "--image-url", endpoints.image]
        env = {**os.environ, PASSWORD_ENV: layout.admin_password, "PYTHONUNBUFFERED": "1"}
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                         start_new_session=True)  # the terminal's Ctrl-C is ours to relay
        finally:
            log.close()
        self.url: str | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_ready, name="identity-ready", daemon=True)
        self._reader.start()

    def _read_ready(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(b"ready "):
                self.url = line.split()[1].decode()
                self._ready.set()
        self._ready.set()  # EOF: the child ended

    def wait_ready(self, cancelled: threading.Event, timeout: float = READY_TIMEOUT_S) -> str:
        """Keystone's URL once it answers; IdentityFailed if it exits, takes
        too long, or ``cancelled`` is set (a SIGTERM while we wait)."""
        deadline = time.monotonic() + timeout
        # The cancel is looked at first: a SIGTERM taken while the rest of
        # the all-in-one started, before this wait, still stops it here even
        # when Keystone has answered meanwhile.
        while not (cancelled.is_set() or self._ready.wait(0.2)):
            if time.monotonic() > deadline:
                raise IdentityFailed(f"Keystone did not answer within {timeout:.0f} s; {self.log_tail()}")
        if cancelled.is_set():
            raise IdentityFailed("stopped before Keystone answered")
        if self.url is not None:
            return self.url
        try:
            status = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            status = "unknown"
        raise IdentityFailed(f"Keystone exited (status {status}) before it answered; {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = (self.layout.root / LOG_NAME).read_text(errors="replace").strip().splitlines()
        except OSError:
            text = []
        return ("its log " + str(self.layout.root / LOG_NAME) + " ends:\n  " + "\n  ".join(text[-lines:])
                if text else "it logged nothing")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # asks it to stop (as this process's death would)
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=1.0)
