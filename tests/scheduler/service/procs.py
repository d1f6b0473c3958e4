"""Real ``billeting scheduler serve`` processes for multi-process tests."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.concurrency.serve import RunningServer, clean_environ, stop, wait_until_up
from tests.support.ports import free_port


@contextmanager
def running_scheduler(*args: str, env: dict[str, str] | None = None, probe: bool = True) -> Iterator[RunningServer]:
    """``probe``: wait for an answer to ``GET /``; without it the caller
    waits in its own way, and its requests are the first the processes see."""
    port = free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="billeting-scheduler-", suffix=".log", delete=False)
    command = [sys.executable, "-m", "billeting.cli", "scheduler", "serve", "--host", "127.0.0.1",
               "--port", str(port), *args]
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env or clean_environ())
    server = RunningServer(f"http://127.0.0.1:{port}", process, Path(log_file.name))
    try:
        if probe:
            wait_until_up(server)
        yield server
    finally:
        try:
            if process.poll() is None:
                stop(server)
        finally:
            log_file.close()
            os.unlink(log_file.name)
