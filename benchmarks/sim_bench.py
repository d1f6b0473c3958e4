#!/usr/bin/env python3
"""How long the simulator takes per design: wall and CPU time, median of runs.

Each run is one design of a scenario in a fresh process (so one run's
caches and heap do not help the next), optionally cut to its first
``--requests`` requests; the figures are that process's wall time and its
user + system CPU time, fleet build and end-of-run checks included. CPU
time is the figure to compare on a shared machine; alternate the versions
being compared rather than running one after the other.

    .venv/bin/python benchmarks/sim_bench.py scenarios/scale-5k.toml \\
        --designs scheduler-claims,scheduler-claims-all --requests 5000 --runs 3
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def _child(path: str, design: str, requests: int | None) -> None:
    import msgspec

    from billeting.sim import runner, scenario

    s = scenario.select_designs(scenario.load(path), [design])
    if requests is not None:
        s = msgspec.structs.replace(s, arrivals=msgspec.structs.replace(s.arrivals, requests=requests))
    run = runner.run(s)
    d = run.designs[0]
    print(json.dumps({"requests": run.requests, "succeeded": d.succeeded, "violations": len(d.violations),
                      "design_wall_s": d.wall_s}))


def _one(path: str, design: str, requests: int | None) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cmd = [sys.executable, __file__, "--child", path, design] + ([str(requests)] if requests else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**json.loads(out.strip().splitlines()[-1]), "wall_s": wall, "cpu_s": cpu}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--designs", required=True, help="comma-separated design names")
    ap.add_argument("--requests", type=int, help="cut the workload to this many requests")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for design in args.designs.split(","):
        runs = [_one(args.scenario, design, args.requests) for _ in range(args.runs)]
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        each = ", ".join(f"{r['cpu_s']:.1f}" for r in runs)
        print(f"{design}: {runs[0]['requests']} requests, median of {len(runs)}: wall {wall:.1f} s, "
              f"CPU {cpu:.1f} s (each: {each}); "
              f"violations {max(r['violations'] for r in runs)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
