#!/usr/bin/env python3
"""Server listing benchmark (issue 29): ``GET /servers`` and ``/servers/detail``
over many servers in several cells.

It creates an API database, cell0 and N cell databases on one server
(PostgreSQL for the reported figures), writes the servers' rows straight
into them (instance records spread over the cells and their instance
mappings: far faster than building them), then times the compute API's
listing in this process through Falcon's test client (the WSGI app with its
middleware, JSON included; no HTTP socket):

  first   the first page, newest first (no marker)
  deep    a page whose marker lies deep in the listing (--deep-fraction of the way)
  project the first page of one project's listing, as its member sees it

each for ``/servers`` and ``/servers/detail`` at --limit, --repeats requests
each after one warm-up; the p50 of each is reported, and the p50 of the CPU
time this process spent on each request (all its threads: a figure a busy
machine blurs less than the wall time). Results: JSON on
stdout, a summary on stderr. Databases are reused when they already hold
the asked-for rows (--fresh to write them again).

    .venv/bin/python benchmarks/listing_bench.py \\
        --server postgresql+psycopg://postgres@127.0.0.1 --servers 100000 --cells 4
"""
from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import pstats
import random
import statistics
import sys
import time
import uuid as uuidlib

import falcon.testing
import msgspec
from sqlalchemy import create_engine, func, insert, select, text
from sqlalchemy.engine import make_url

from billeting.api.compute.plane import ControlPlane
from billeting.apidb import cell_mappings
from billeting.apidb import migrate as api_migrate
from billeting.apidb import tables as at
from billeting.apidb.cell_directory import CellCatalog, CellHandle
from billeting.cells import migrate as cell_migrate
from billeting.cells import tables as ct
from billeting.cells.messages import RequestSummary
from billeting.messaging import Bus
from billeting.placement.store import migrate as placement_migrate
from billeting.common.db.engine import make_engine
from billeting.placement.store.sync import sync_standard_names
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler.nova import Flavor, Image

PROJECTS = 50
CHUNK = 5000
_enc = msgspec.json.Encoder().encode


def _database(server: str, name: str, fresh: bool) -> tuple[str, bool]:
    """(URL of database ``name`` on ``server``, whether it was created now)."""
    url = make_url(server)
    admin = create_engine(url.set(database="postgres" if url.get_backend_name() == "postgresql" else None),
                          isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        exists = bool(conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()) \
            if url.get_backend_name() == "postgresql" else \
            bool(conn.execute(text("SHOW DATABASES LIKE :n"), {"n": name}).first())
        if exists and fresh:
            conn.execute(text(f"DROP DATABASE {name}"))
            exists = False
        if not exists:
            suffix = " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" if url.get_backend_name() == "mysql" else ""
            conn.execute(text(f"CREATE DATABASE {name}{suffix}"))
    admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False), not exists


def _load(api_engine, cell_engines: dict, servers: int, rng: random.Random) -> None:
    """``servers`` records spread over the cells, one a second apart (so
    that the newest-first order is the order written), and their mappings."""
    cell_ids = dict(select_cell_ids(api_engine))
    flavor = _enc(Flavor(vcpus=2, memory_mb=4096, root_gb=40, name="m1.medium",
                         extra_specs={"hw:cpu_policy": "shared"})).decode()
    image = _enc(Image(id="cirros", disk_format="qcow2")).decode()
    start = dt.datetime(2030, 1, 1)
    names = sorted(cell_engines)
    batches: dict[str, list[dict]] = {n: [] for n in names}
    mappings: list[dict] = []

    def flush() -> None:
        for name, rows in batches.items():
            if rows:
                with cell_engines[name].begin() as conn:
                    conn.execute(insert(ct.instances), rows)
                rows.clear()
        if mappings:
            with api_engine.begin() as conn:
                conn.execute(insert(at.instance_mappings), mappings)
            mappings.clear()

    for i in range(servers):
        cell = names[i % len(names)]
        uuid = str(uuidlib.UUID(int=rng.getrandbits(128)))
        project = f"project-{rng.randrange(PROJECTS)}"
        created = start + dt.timedelta(seconds=i)
        host = f"{cell}-host{rng.randrange(100)}"
        summary = _enc(RequestSummary(project_id=project, user_id="user")).decode()
        batches[cell].append(dict(
            uuid=uuid, name=f"server-{i}", project_id=project, user_id="user", vm_state="active", task_state=None,
            host=host, node=host, compute_node_uuid=None, availability_zone="nova", flavor=flavor, image=image,
            request=summary, selection=None, alternates="[]", num_attempts=1, hosts_tried="[]", last_failure=None,
            created_at=created, updated_at=created, launched_at=created, deleted_at=None))
        mappings.append(dict(instance_uuid=uuid, cell_id=cell_ids[cell], project_id=project, user_id="user",
                             queued_for_delete=False, created_at=created, updated_at=created))
        if len(mappings) >= CHUNK:
            flush()
    flush()
    for engine in (api_engine, *cell_engines.values()):
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE"))


def select_cell_ids(api_engine):
    with api_engine.connect() as conn:
        return conn.execute(select(at.cell_mappings.c.name, at.cell_mappings.c.id)).all()


def _time(client, path: str, query: str, token: str, repeats: int, profiler: cProfile.Profile | None) -> dict:
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.90"}
    r = client.simulate_get(path, query_string=query, headers=headers)  # warm-up
    assert r.status_code == 200, r.text
    listed = len(r.json["servers"])
    times, cpu = [], []
    for _ in range(repeats):
        if profiler is not None:
            profiler.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        r = client.simulate_get(path, query_string=query, headers=headers)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        if profiler is not None:
            profiler.disable()
        assert r.status_code == 200, r.text
    return {"path": path, "query": query, "servers": listed, "p50_ms": round(statistics.median(times), 2),
            "min_ms": round(min(times), 2), "max_ms": round(max(times), 2),
            "cpu_p50_ms": round(statistics.median(cpu), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, help="database server URL without a database name")
    ap.add_argument("--prefix", default="listing_bench", help="names of the databases made")
    ap.add_argument("--servers", type=int, default=100_000)
    ap.add_argument("--cells", type=int, default=4)
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--deep-fraction", type=float, default=0.9)
    ap.add_argument("--fresh", action="store_true", help="drop and write the databases again")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--cases", default="first,deep,project", help="which cases to time, comma-separated")
    ap.add_argument("--paths", default="servers,servers/detail", help="which listings to time, comma-separated")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the timed requests (the times then include its overhead) and print the "
                         "functions that take the most time on stderr")
    args = ap.parse_args()

    urls = {}
    created = False
    for name in ("api", "placement", "cell0", *(f"cell{i + 1}" for i in range(args.cells))):
        urls[name], made = _database(args.server, f"{args.prefix}_{name}", args.fresh)
        created = created or made
    api_engine = make_engine(urls["api"])
    api_migrate.upgrade(api_engine)
    placement_engine = make_engine(urls["placement"])
    placement_migrate.upgrade(placement_engine)
    sync_standard_names(placement_engine)
    cell_engines = {}
    for name in ("cell0", *(f"cell{i + 1}" for i in range(args.cells))):
        cell_engines[name] = make_engine(urls[name])
        cell_migrate.upgrade(cell_engines[name])
        cell_mappings.ensure_cell(api_engine, name=name, database_connection=urls[name],
                                  transport_url=None if name == "cell0" else f"memory:///{name}")
    cells = {n: e for n, e in cell_engines.items() if n != "cell0"}
    with api_engine.connect() as conn:
        have = conn.execute(select(func.count()).select_from(at.instance_mappings)).scalar()
    if have != args.servers:
        if have:
            print(f"the databases hold {have} servers, not {args.servers}: use --fresh", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        _load(api_engine, cells, args.servers, random.Random(args.seed))
        print(f"wrote {args.servers} servers over {args.cells} cells in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)

    buses = {n: Bus(f"memory:///{n}-{uuidlib.uuid4().hex[:8]}") for n in cells}
    catalog = CellCatalog(api_engine, {n: CellHandle(n, e, buses[n]) for n, e in cells.items()},
                          cell_engines["cell0"])
    placement = InProcessPlacementClient(placement_engine)
    plane = ControlPlane(api_engine=api_engine, cells=catalog, placement=placement, catalog_refresh_s=0.0)
    client = falcon.testing.TestClient(plane.app())
    try:
        # The marker deep in the listing: newest first, the row written at (1 - f) of the way.
        deep_index = int(args.servers * (1 - args.deep_fraction))
        deep_cell = sorted(cells)[deep_index % len(cells)]
        with cells[deep_cell].connect() as conn:
            marker = conn.execute(select(ct.instances.c.uuid, ct.instances.c.project_id).where(
                ct.instances.c.name == f"server-{deep_index}")).first()
        results = []
        limit = f"limit={args.limit}"
        cases = {"first": (f"all_tenants=1&{limit}", "admin"),
                 "deep": (f"all_tenants=1&{limit}&marker={marker.uuid}", "admin"),
                 "project": (limit, f"member:{marker.project_id}")}
        profiler = cProfile.Profile() if args.profile else None
        for path in args.paths.split(","):
            for case in args.cases.split(","):
                query, token = cases[case]
                results.append({"case": case, **_time(client, f"/v2.1/{path}", query, token, args.repeats,
                                                      profiler)})
    finally:
        plane.close()
        placement.close()
        for bus in buses.values():
            bus.close()
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)
        print(out.getvalue(), file=sys.stderr)
    report = {"servers": args.servers, "cells": args.cells, "limit": args.limit, "repeats": args.repeats,
              "backend": make_url(args.server).get_backend_name(), "results": results}
    print(json.dumps(report, indent=2))
    for r in results:
        print(f"{r['case']:8} {r['path']:22} {r['servers']:5} servers  p50 {r['p50_ms']:8.2f} ms "
              f"(min {r['min_ms']:.2f}, max {r['max_ms']:.2f}; this process's CPU p50 {r['cpu_p50_ms']:.2f} ms)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
