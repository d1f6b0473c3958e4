#!/usr/bin/env python3
"""CPU time of one select + claim, by part (for tuning; not a benchmark).

Runs N single-instance requests through the in-process client against an
already loaded fleet (see scheduler_bench.py) and reports the median
process CPU time per request of: the candidates call (Placement's engine and
the typed answer), host states, ranking, the claim, and the total; and the
wall time of the candidates call and of the claim (database work included).
CPU time, not wall time, so a busy machine does not blur the figures.

    .venv/bin/python benchmarks/profile_request.py \\
        --db postgresql+psycopg://postgres@127.0.0.1/sched_bench_5k_perf -n 30
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import scheduler_bench as bench  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="cProfile the requests instead")
    ap.add_argument("--no-claim", action="store_true")
    ap.add_argument("--unbounded", action="store_true",
                    help="no limit, as the scheduler asks for server groups and same/different_host")
    args = ap.parse_args()

    from billeting.placement_client import claims
    from billeting.scheduler import core

    sched = bench.make_scheduler("inprocess", args.db, "unused", args.limit, 1)
    if args.unbounded:
        import msgspec

        from billeting.scheduler import query

        build = query.build
        query.build = lambda *a, **kw: msgspec.structs.replace(build(*a, **kw), limit=None)
    parts: dict[str, float] = defaultdict(float)
    walls: dict[str, float] = defaultdict(float)

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0, w0 = time.process_time(), time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                parts[name] += time.process_time() - t0
                walls[name] += time.perf_counter() - w0
        return wrapper

    sched.client.allocation_candidates = timed("candidates", sched.client.allocation_candidates)
    core.host_states = timed("host_states", core.host_states)
    sched.pipeline.rank = timed("rank", sched.pipeline.rank)
    claims.claim = timed("claim", claims.claim)
    for _ in range(3):
        sched.select_destinations(bench.request(), alternates=2, claim=not args.no_claim)
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        for _ in range(args.n):
            sched.select_destinations(bench.request(), alternates=2, claim=not args.no_claim)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return 0
    rows = defaultdict(list)
    for _ in range(args.n):
        parts.clear()
        walls.clear()
        t0, w0 = time.process_time(), time.perf_counter()
        sched.select_destinations(bench.request(), alternates=2, claim=not args.no_claim)
        rows["total"].append(time.process_time() - t0)
        rows["wall"].append(time.perf_counter() - w0)
        for k in ("candidates", "host_states", "rank", "claim"):
            rows[k].append(parts[k])
        for k in ("candidates", "claim"):
            rows[f"{k}_wall"].append(walls[k])
    rows["other"] = [t - sum(rows[k][i] for k in ("candidates", "host_states", "rank", "claim"))
                     for i, t in enumerate(rows["total"])]
    # CPU of this process per part; *_wall: wall time of the candidates call
    # and the claim, which include the database's own work.
    print("median " + " ".join(f"{k}={statistics.median(v) * 1000:.2f}ms" for k, v in rows.items()))
    print("min    " + " ".join(f"{k}={min(v) * 1000:.2f}ms" for k, v in rows.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
