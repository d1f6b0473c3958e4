"""Every command block of README.md and docs/ marked ``<!-- run: NAME -->``
(see ``blocks.py``), run as a reader would run it.

Only what a test must change is changed: the well-known ports become free
ones (8774, 8778 and 8779 keep their distances, as ``billeting up
--port-base`` does), ``BILLETING_SCHEDULER_URL`` points ``billeting
topology`` at the moved scheduler, and the per-user data and state
directories are private to the run, so the embedded databases are fresh.
Whatever a script leaves running is stopped with its process group.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, Script, all_scripts

pytestmark = [
    pytest.mark.slow,
    # The blocks use the embedded SQLite defaults whatever the backend: once is enough.
    pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB", "sqlite") != "sqlite",
                       reason="runs in the SQLite pass (the blocks use the embedded databases)"),
]

SCRIPTS = all_scripts()


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_range(width: int) -> int:
    """A base port with ``width`` free ports from it."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - width)
        if all(_bindable(base + k) for k in range(width)):
            return base
    raise RuntimeError("no free port range")


def _ports() -> dict[int, int]:
    base = _free_range(7)  # up's three (N, N+4, N+5) and a separate scheduler's
    return {8774: base, 8778: base + 4, 8779: base + 5, 8780: base + 6}


def _with_ports(text: str, ports: dict[int, int]) -> str:
    return re.sub(r"(?<![0-9])(8774|8778|8779|8780)(?![0-9])", lambda m: str(ports[int(m[1])]), text)


def run(script: Script, tmp_path: Path) -> tuple[int, str]:
    ports = _ports()
    work = tmp_path / "work"
    work.mkdir()
    suffix = ".sh" if script.lang == "sh" else ".py"
    program = tmp_path / f"{script.name}{suffix}"
    program.write_text(_with_ports(script.text, ports))
    command = ["bash", "-e", str(program)] if script.lang == "sh" else [sys.executable, str(program)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BILLETING_", "OS_"))}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_CONFIG_HOME=str(tmp_path / "config"),
               BILLETING_SCHEDULER_URL=f"http://127.0.0.1:{ports[8780]}",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "output.txt"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, cwd=ROOT if script.in_repo else work, env=env, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=script.timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, log.read_text(errors="replace")


# --- what some scripts must print, beyond succeeding ----------------------------

RACKS = {"host1": "r1", "host2": "r1", "host3": "r2", "host4": "r2", "host5": "r3", "host6": "r3"}


def _walkthrough(out: str, tmp_path: Path) -> None:
    assert "row w1  members r1, r2, r3  hosts host1, host2, host3, host4, host5, host6" in out, out
    landed = re.findall(r"^server \S+ on (host\d)$", out, re.M)
    assert len(landed) == 3 and len({RACKS[h] for h in landed}) == 3, out
    assert re.search(r"^409 billeting\.no_valid_host No valid host was found for 1 instance", out, re.M), out
    assert (tmp_path / "data" / "billeting" / "scheduler.sqlite").exists()


def _tour(out: str, tmp_path: Path) -> None:
    landed = re.findall(r"^\| web\d \| ACTIVE \| (compute\d+) \|$", out, re.M)   # openstack server list
    assert len(landed) == 3 and len(set(landed)) == 3, out  # anti-affinity: three hosts
    assert re.search(r"^20$", out, re.M) and "20 hypervisors" in out, out  # osc-placement, openstacksdk
    ranked = re.findall(r"^compute\d+ [0-9.]+ \{'RAMWeigher'", out, re.M)
    assert len(ranked) == 3, out
    assert re.search(r"^409 billeting\.no_valid_host$", out, re.M), out
    assert "lacked trait HW_CPU_X86_AVX512F" in out, out


def _placement_first_look(out: str, tmp_path: Path) -> None:
    assert '"max_version": "1.39"' in out.replace('":"', '": "'), out
    assert out.count('"name": "compute-1"') + out.count('"name":"compute-1"') == 2, out  # created, then listed
    assert '"status"' in out and '"ok"' in out, out  # the health check


def _upgrades(out: str, tmp_path: Path) -> None:
    assert "behind (exit 1)" in out and re.search(r"placement\.sqlite: revision (\d+), head \1$", out, re.M), out


def _moves(out: str, tmp_path: Path) -> None:
    assert re.search(r"^h\d -> h\d status resized$", out, re.M), out
    assert re.search(r"^after confirm: migration holds \{\} instance on h\d$", out, re.M), out


def _compute_api_session(out: str, tmp_path: Path) -> None:
    assert "HTTP/1.1 202 Accepted" in out, out                   # two servers accepted
    assert re.search(r"(^|\})204$", out, re.M), out             # one deleted (curl prints no newline)
    assert '"availability_zone": "az1"' in out and '"name": "faster"' in out, out   # an aggregate, renamed


def _lifecycle_session(out: str, tmp_path: Path) -> None:
    assert '"computeFault"' not in out and '"conflictingRequest"' not in out, out  # no action was refused
    for status in ("SHUTOFF", "REBUILD", "SHELVED_OFFLOADED"):
        assert re.search(rf"^{status}$", out, re.M), out
    assert "(True, 'maintenance')" in out and re.search(r"^back on compute\d+$", out, re.M), out  # locked; unshelved
    assert re.search(r"(^|\})204$", out, re.M), out


def _exit_statuses(out: str, tmp_path: Path) -> None:
    # (the migration head moves with the schema: any revision reads the same)
    lines = out.splitlines()[-5:]
    assert lines[:2] == ["billeting: error: workers must be at least 1, not 0", "exit 2"], out
    assert re.fullmatch(r"database sqlite:///nowhere\.sqlite: revision none, head \d+ "
                        r"\(behind; run 'billeting db upgrade --db sqlite:///nowhere\.sqlite'\)", lines[2]), out
    assert lines[3:] == ["exit 1", "nowhere.sqlite was not created"], out


def _json_documents(out: str, start: str) -> list:
    """The JSON documents in ``out`` that begin with ``start`` (curl prints them back to back)."""
    decoder, found, i = json.JSONDecoder(), [], out.find(start)
    while i != -1:
        found.append(decoder.raw_decode(out, i)[0])
        i = out.find(start, i + 1)
    return found


def _scheduler_api(out: str, tmp_path: Path) -> None:
    assert '"errors"' not in out, out                            # every call of the session succeeded
    assert len(_json_documents(out, '{"selections":')) == 4, out  # four instances placed
    dry_runs = _json_documents(out, '{"hosts":[{"host"')
    assert [h["host"] for h in dry_runs[-1]["hosts"]] == ["host3"], out  # only host3 has SEV and kvm >= 8.0
    assert "/selections" in out.splitlines() and "/topology/{level}/{name}" in out.splitlines(), out


CHECKS: dict[str, Callable[[str, Path], None]] = {
    "README.md:walkthrough": _walkthrough,
    "README.md:tour": _tour,
    "docs/operator/placement.md:placement-first-look": _placement_first_look,
    "docs/operator/upgrades.md:upgrade-commands": _upgrades,
    "docs/operator/moves.md:moves-in-one-process": _moves,
    "docs/operator/compute-api.md:compute-api-session": _compute_api_session,
    "docs/operator/compute-api.md:lifecycle-session": _lifecycle_session,
    "docs/operator/configuration.md:exit-statuses": _exit_statuses,
    "docs/operator/scheduler.md:scheduler-api": _scheduler_api,
}


def test_the_blocks_are_found():
    ids = [s.id for s in SCRIPTS]
    assert len(ids) == len(set(ids))
    assert set(CHECKS) <= set(ids), "a check names a script that no longer exists"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.id for s in SCRIPTS])
def test_block_runs(script: Script, tmp_path):
    returncode, out = run(script, tmp_path)
    assert returncode == 0, f"{script.id} (line {script.line}) exited {returncode}:\n{out}"
    check = CHECKS.get(script.id)
    if check is not None:
        check(out, tmp_path)
