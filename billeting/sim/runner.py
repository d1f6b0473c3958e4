"""Run every design of a scenario and gather one ``RunResult``.

In-process (the default) the fleet is built once into a SQLite file in a
temporary directory (in /dev/shm when there is one) and each design starts
from its own copy, so every design sees the very same fleet and prefill.
With a Placement URL each design builds its own fleet under a name prefix
of its own (Placement is shared and cannot be copied); nothing is deleted
afterwards, so point it at a scratch Placement.
"""
from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import shutil
import tempfile
import uuid as uuidlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from billeting.sim import checker, fleet as fleet_mod, metrics, prefill as prefill_mod, snapshot, workload
from billeting.sim.engine import Run
from billeting.sim.results import DesignResult, RunResult
from billeting.sim.scenario import DesignSpec, Scenario


@dataclass
class Hooks:
    """Progress callbacks (the CLI draws a bar with them)."""
    phase: Callable[[str], None] = lambda text: None
    design_started: Callable[[DesignSpec, int], None] = lambda design, total: None
    advance: Callable[[int], None] = lambda n: None


def _version() -> str:
    try:
        return importlib.metadata.version("billeting")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _sqlite_engine(path: Path):
    from billeting.placement.store import migrate
    from billeting.common.db.engine import make_engine
    from billeting.placement.store.sync import sync_standard_names

    engine = make_engine(f"sqlite:///{path}")
    if not path.exists() or path.stat().st_size == 0:
        migrate.upgrade(engine)
        sync_standard_names(engine)
    return engine


def _close(engine) -> None:
    from sqlalchemy import text

    with engine.connect() as conn:
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    engine.dispose()


@contextmanager
def _workdir():
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="billeting-sim-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(scenario: Scenario, *, placement_url: str | None = None, client=None,
        hooks: Hooks | None = None) -> RunResult:
    """Run every design. ``client``: an existing Placement client to build the
    fleets in (as with ``placement_url``; tests pass one on their database)."""
    hooks = hooks or Hooks()
    started_at = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    arrivals = workload.generate(scenario)
    results: list[DesignResult] = []
    notes: list[str] = []
    if placement_url is None and client is None:
        from billeting.placement_client.inprocess import InProcessPlacementClient

        with _workdir() as work:
            template = work / "template.db"
            engine = _sqlite_engine(template)
            hooks.phase(f"building the fleet ({scenario.host_count} hosts)")
            client = InProcessPlacementClient(engine)
            fleet = fleet_mod.build(client, scenario)
            prefilled = prefill_mod.prefill(client, scenario, fleet)
            _close(engine)
            for design in scenario.designs:
                db = work / f"design-{len(results)}.db"
                shutil.copyfile(template, db)
                engine = _sqlite_engine(db)
                try:
                    results.append(_one(scenario, design, InProcessPlacementClient(engine), fleet, prefilled,
                                        arrivals, hooks))
                finally:
                    engine.dispose()
                    db.unlink(missing_ok=True)
    else:
        from billeting.placement_client import http_client

        run_id = uuidlib.uuid4().hex[:6]
        own = client is None
        client = client or http_client(placement_url)
        try:
            for i, design in enumerate(scenario.designs):
                prefix = f"sim{run_id}-{i}-"
                hooks.phase(f"building the fleet for {design.name} ({scenario.host_count} hosts over HTTP)")
                fleet = fleet_mod.build(client, scenario, prefix=prefix)
                prefilled = prefill_mod.prefill(client, scenario, fleet)
                results.append(_one(scenario, design, client, fleet, prefilled, arrivals, hooks))
        finally:
            if own:
                client.close()
        notes.append(f"Placement at {placement_url or 'a caller-given client'}; fleets created under prefix "
                     f"sim{run_id}-N-")
    return RunResult(scenario=scenario.name, seed=scenario.seed, hosts=scenario.host_count,
                     cells=scenario.fleet.cells, requests=len(arrivals), designs=results,
                     billeting_version=_version(), started_at=started_at, notes=notes)


def _one(scenario, design, client, fleet, prefilled, arrivals, hooks: Hooks) -> DesignResult:
    hooks.design_started(design, len(arrivals))
    sim = Run(scenario, design, client, fleet, prefilled, arrivals, progress=hooks.advance)
    sim.run()
    hooks.phase(f"checking {design.name}")
    ours = {p for h in fleet.hosts for p in h.providers} | fleet.sharing
    expect = {}
    for inst in sim.instances.values():
        f = inst.arrival.flavor
        req, forb = metrics.flavor_traits(f)
        expect[inst.uuid] = checker.InstanceExpect(uuid=inst.uuid, required=req, forbidden=forb, group=inst.group)
    looked_at = {t for e in expect.values() for t in (*e.required, *e.forbidden)}
    engine = getattr(client, "engine", None)  # in-process: read its tables (sim/snapshot.py)
    state = snapshot.read_state(engine, only=ours, traits=looked_at) if engine is not None else \
        checker.read_state(client, only=ours, traits=looked_at)
    groups = {g.uuid: checker.GroupExpect(uuid=g.uuid, policy=g.policy, scope=g.scope,
                                          max_server_per_host=g.max_server_per_host)
              for g in sim.groups.values()}
    topology = {h.uuid: h.domains for h in fleet.hosts}
    violations = checker.check(state, expect, groups, topology)
    return metrics.design_result(sim, state, violations)
