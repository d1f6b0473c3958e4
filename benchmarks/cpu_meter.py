"""CPU time by process group over the middle of a concurrent phase (Linux).

The rate a run reaches says how fast the whole was; CPU time per placed
instance, by group, says which process a change made cheaper. Both move
with the CPU's own speed, which on a shared host changes from minute to
minute: compare versions in alternating runs. Read from ``/proc``: each
process's user + system time, grouped by which server's tree it is in.

Groups: ``placement`` (the ``billeting serve`` tree this benchmark started),
``scheduler`` (the ``billeting scheduler serve`` tree), ``postgresql``
(processes named ``postgres``, when the database is on this machine),
``bench`` (every other process this benchmark started: the client processes
and the pool's manager; in the ``clients`` phase the clients *are* the
schedulers).
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def available() -> bool:
    return os.path.exists("/proc/stat") and os.path.exists(f"/proc/{os.getpid()}/stat")


def _processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, name, CPU seconds so far)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue  # it exited meanwhile
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        found[int(entry)] = (int(fields[1]), name, (int(fields[11]) + int(fields[12])) / _TICK)
    return found


def _machine() -> tuple[int, int]:
    """(busy, total) jiffies of every CPU since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])
    return total - idle, total


def _group_of(pid: int, procs: dict, roots: dict[int, str], me: int, local_db: bool) -> str | None:
    if local_db and procs[pid][1] == "postgres":
        return "postgresql"
    seen = 0
    while pid in procs and seen < 64:  # up the tree to a known root
        if pid in roots:
            return roots[pid]
        if pid == me:
            return "bench"
        pid = procs[pid][0]
        seen += 1
    return None


def snapshot(roots: dict[int, str], local_db: bool) -> tuple[dict[str, float], tuple[int, int]]:
    procs = _processes()
    me = os.getpid()
    totals: dict[str, float] = {}
    for pid, (_, _, cpu) in procs.items():
        group = _group_of(pid, procs, roots, me, local_db)
        if group is not None:
            totals[group] = totals.get(group, 0.0) + cpu
    return totals, _machine()


class Window:
    """Measures from ``start`` to ``stop``: CPU seconds per group and how
    busy the whole machine was."""

    def __init__(self, roots: dict[int, str], local_db: bool) -> None:
        self.roots, self.local_db = roots, local_db
        self.result: dict | None = None

    def start(self) -> None:
        self._began = time.monotonic()
        self._first, self._machine_first = snapshot(self.roots, self.local_db)

    def stop(self) -> None:
        last, machine_last = snapshot(self.roots, self.local_db)
        busy = machine_last[0] - self._machine_first[0]
        total = machine_last[1] - self._machine_first[1]
        self.result = {
            "seconds": time.monotonic() - self._began,
            "cpu_s": {g: round(last.get(g, 0.0) - self._first.get(g, 0.0), 3)
                      for g in sorted(set(last) | set(self._first))},
            "machine_busy_pct": round(100.0 * busy / total, 1) if total else None,
        }


def middle_of(phase_seconds: float, window: Window, released: threading.Event) -> threading.Thread:
    """A thread that measures the middle 60 % of a phase that starts when
    ``released`` is set (the clients' start barrier)."""

    def run():
        released.wait()
        time.sleep(phase_seconds * 0.2)
        window.start()
        time.sleep(phase_seconds * 0.6)
        window.stop()

    thread = threading.Thread(target=run, name="cpu-meter", daemon=True)
    thread.start()
    return thread


def per_instance(window: Window, instances_per_s: float) -> dict | None:
    """CPU milliseconds per placed instance by group, the instances of the
    window counted at the phase's mean rate."""
    if window.result is None or instances_per_s <= 0:
        return None
    placed = instances_per_s * window.result["seconds"]
    cpu = window.result["cpu_s"]
    out = {g: round(1000.0 * s / placed, 2) for g, s in cpu.items()}
    out["all"] = round(1000.0 * sum(cpu.values()) / placed, 2)
    return {"cpu_ms_per_instance": out, "machine_busy_pct": window.result["machine_busy_pct"]}


def local(url: str, hosts: Iterable[str] = ("127.0.0.1", "localhost", "::1")) -> bool:
    """Is the database of ``url`` on this machine (its processes countable)?"""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.get_backend_name() == "postgresql" and (parsed.host in (None, "", *hosts))
