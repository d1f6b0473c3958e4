"""The README's scheduler walk-through, run as a new user would: start
Placement and the scheduler on their embedded defaults, define racks and a
row, place three servers with rack anti-affinity, see the fourth refused.

Only what a test must change is changed: free ports instead of 8778/8780
(and BILLETING_SCHEDULER_URL so ``billeting topology`` finds the moved
scheduler), and a private data directory (XDG_DATA_HOME) for the embedded
databases."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.concurrency.serve import clean_environ, free_port

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = [
    pytest.mark.slow,
    # It uses the embedded SQLite defaults whatever the backend: once is enough.
    pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB", "sqlite") != "sqlite",
                       reason="runs in the SQLite pass (the walk-through uses the embedded databases)"),
]


def walkthrough() -> str:
    text = README.read_text()
    block = text.split("<!-- walkthrough:begin -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    return block.split("```sh\n", 1)[1].rsplit("```", 1)[0]


def test_the_readme_walkthrough(tmp_path):
    scheduler_port = free_port()
    script = walkthrough().replace("8778", str(free_port())).replace("8780", str(scheduler_port))
    (tmp_path / "walkthrough.sh").write_text(script)
    # The topology commands find the scheduler at the default port unless told.
    env = clean_environ(XDG_DATA_HOME=str(tmp_path / "data"),
                        BILLETING_SCHEDULER_URL=f"http://127.0.0.1:{scheduler_port}",
                        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "output.txt"
    with log.open("w") as sink:
        # Its own session: whatever the script leaves running is stopped with it.
        proc = subprocess.Popen(["bash", "-e", "walkthrough.sh"], cwd=tmp_path, env=env, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=240)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    out = log.read_text(errors="replace")
    assert proc.returncode == 0, out
    assert "row w1  members r1, r2, r3  hosts host1, host2, host3, host4, host5, host6" in out, out
    landed = re.findall(r"^server \S+ on (host\d)$", out, re.M)
    racks = {"host1": "r1", "host2": "r1", "host3": "r2", "host4": "r2", "host5": "r3", "host6": "r3"}
    assert len(landed) == 3 and len({racks[h] for h in landed}) == 3, out
    assert re.search(r"^409 billeting\.no_valid_host No valid host was found for 1 instance", out, re.M), out
    assert (tmp_path / "data" / "billeting" / "scheduler.sqlite").exists()
