#!/usr/bin/env python3
"""Rows PostgreSQL reads per scheduling decision, statement by statement.

``scheduler_bench.py`` counts the rows a whole concurrent phase reads; this
says which statements read them. It runs ``--decisions`` sequential
single-instance decisions with the in-process Placement client against an
already loaded benchmark database (``scheduler_bench.py --phases verify``
loads one) and, around every statement, reads the transaction's own
counters (``pg_stat_get_xact_tuples_returned`` + ``_fetched`` of every
table and index of the schema): the same rows ``pg_stat_database`` sums,
attributed to the statement that read them. Catalog reads are left out.

    .venv/bin/python benchmarks/decision_reads.py \\
        --db postgresql+psycopg://postgres@127.0.0.1/sched_bench --decisions 50
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import event, text

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scheduler_bench as bench  # noqa: E402 - (this directory)
from billeting.placement_client.inprocess import InProcessPlacementClient  # noqa: E402
from billeting.scheduler import Scheduler, SchedulerSettings  # noqa: E402
from billeting.scheduler.catalog import PlacementHostCatalog  # noqa: E402
from billeting.scheduler.directory import MemoryDirectory  # noqa: E402


@dataclass(slots=True)
class Tally:
    executions: int = 0
    rows_read: int = 0


_PROBE = ("SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(o) + pg_stat_get_xact_tuples_fetched(o)), 0) "
          "FROM unnest(%s::oid[]) AS o")


def _label(statement: str) -> str:
    """A short name for a statement: its kind and the tables it names."""
    words = statement.split()
    kind = words[0].upper() if words else "?"
    tables = sorted(set(re.findall(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+([a-z_]+)", statement)))
    return f"{kind} {','.join(tables)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="a loaded benchmark database (PostgreSQL)")
    ap.add_argument("--decisions", type=int, default=50)
    ap.add_argument("--candidate-sample", default="adaptive")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--statements", action="store_true", help="print each statement's SQL once (stderr)")
    args = ap.parse_args()
    os.environ["BILLETING_SCHEDULER_CANDIDATE_SAMPLE"] = args.candidate_sample

    engine = bench.engine_for(args.db)
    with engine.connect() as conn:
        oids = [int(o) for o in conn.execute(text(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')")).scalars()]
    tallies: dict[str, Tally] = defaultdict(Tally)
    counting = [False]

    def probe(dbapi_conn) -> int:
        with dbapi_conn.cursor() as cur:
            cur.execute(_PROBE, (oids,))
            return int(cur.fetchone()[0])

    @event.listens_for(engine, "before_cursor_execute")
    def before(conn, cursor, statement, parameters, context, executemany):
        if counting[0]:
            conn.info["rows_before"] = probe(conn.connection.dbapi_connection)

    @event.listens_for(engine, "after_cursor_execute")
    def after(conn, cursor, statement, parameters, context, executemany):
        if counting[0] and "rows_before" in conn.info:
            tally = tallies[_label(statement)]
            if args.statements and tally.executions == 0:
                print(f"-- {_label(statement)}\n{statement}\n", file=sys.stderr)
            tally.executions += 1
            tally.rows_read += probe(conn.connection.dbapi_connection) - conn.info.pop("rows_before")

    client = InProcessPlacementClient(engine)
    directory = MemoryDirectory()
    catalog = PlacementHostCatalog(client, directory, refresh_s=3600)
    scheduler = Scheduler(client, catalog, directory,
                          SchedulerSettings(max_placement_results=args.limit,
                                            candidate_sample=args.candidate_sample),
                          rng=random.Random(7))
    catalog.host_uuids()
    scheduler.select_destinations(bench.request(), alternates=2)  # warm
    counting[0] = True
    for _ in range(args.decisions):
        scheduler.select_destinations(bench.request(), alternates=2)
    counting[0] = False
    total = sum(t.rows_read for t in tallies.values())
    print(f"{args.decisions} decisions, candidate_sample={args.candidate_sample}: "
          f"{total / args.decisions:.1f} rows read per decision")
    for label, tally in sorted(tallies.items(), key=lambda kv: -kv[1].rows_read):
        print(f"  {tally.rows_read / args.decisions:8.1f} rows  {tally.executions / args.decisions:5.2f} "
              f"statements  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
