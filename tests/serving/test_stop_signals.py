"""A stop signal sent to the whole process group (what ``timeout``, a shell's
Ctrl-C and many supervisors do) reaches the master and every worker at once,
and the master then signals the workers again: the stop must stay quiet.

The failure this guards against was a race (a second signal arriving while
the worker's event loop closed: Python printed "Exception ignored ...
BrokenPipeError" with a traceback), lost in one stop in two to four of
``billeting scheduler serve``; each attempt is a fresh server."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.concurrency.serve import RunningServer, clean_environ, wait_until_up
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("attempt", range(4))
def test_a_stop_signal_to_the_process_group_leaves_no_traceback(attempt, tmp_path):
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "billeting.cli", "scheduler", "serve", "--port", str(port),
             "--db", f"sqlite:///{tmp_path / 'scheduler.sqlite'}", "--auto-upgrade",
             "--placement-url", "http://127.0.0.1:9"],
            stdout=log_file, stderr=subprocess.STDOUT, env=clean_environ(), start_new_session=True,
            cwd=Path(__file__).resolve().parents[2])
        try:
            wait_until_up(RunningServer(f"http://127.0.0.1:{port}", process, log_path))
            # As GNU timeout does: the command first, then its whole group.
            os.kill(process.pid, signal.SIGTERM)
            os.killpg(process.pid, signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    log = log_path.read_text()
    assert "Traceback" not in log and "Exception ignored" not in log, log
