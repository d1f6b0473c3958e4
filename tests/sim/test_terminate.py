"""A simulation stopped by SIGTERM (``timeout``, CI) still removes its
temporary databases: the fleet copies of a 5,000-host run are tens of MB
each in /dev/shm, and a killed run used to leave them behind."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

CHILD = """
import time
from billeting.sim import runner
from billeting.commands import simulate as cli
with cli.terminate_as_exit():
    with runner._workdir() as work:
        (work / "template.db").write_bytes(b"x" * 1024)
        print(work, flush=True)
        time.sleep(60)
"""


def test_sigterm_removes_the_work_directory():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        work = Path(child.stdout.readline().strip())
        assert (work / "template.db").is_file()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
    assert not work.exists()
