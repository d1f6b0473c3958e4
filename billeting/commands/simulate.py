"""``billeting simulate``: run a scenario's designs, report, and compare runs.

    billeting simulate SCENARIO.toml [--designs a,b] [--seed N] [--out DIR] [--placement-url URL]
                                     [--baseline BASELINE.json] [--no-html]
    billeting simulate SCENARIO.toml --seeds 1-5 [--designs a,b] [--out DIR]
    billeting simulate --compare BASELINE.json CANDIDATE.json

A run writes DIR/result.json and DIR/report.html (default DIR:
./sim-out/<scenario>) and prints the table of designs side by side and the
paragraph that explains them. ``--compare`` (or ``--baseline`` after a run)
says whether the candidate is at least as fast and as accurate as the
baseline, figure by figure, and exits 1 when it is not (2: the runs are not
comparable). ``--seeds`` runs the scenario once per seed (DIR/seed-N/result.json)
and reports each figure's spread over them (DIR/seeds.json, DIR/report.html).
A bad scenario or flag is one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

EXIT_USAGE = 2


def register(commands) -> None:
    p = commands.add_parser("simulate", help="compare scheduling designs on a simulated fleet and workload")
    p.add_argument("scenario", metavar="SCENARIO.toml", nargs="?", help="the scenario file (see scenarios/)")
    p.add_argument("--designs", default=None, metavar="A,B",
                   help="designs to run, by name or kind (legacy, conductor-claims, scheduler-claims); "
                        "default: every design of the scenario")
    p.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    p.add_argument("--seeds", default=None, metavar="LIST",
                   help="run once per seed (e.g. 1,2,3 or 1-5) and report each figure's spread over the "
                        "seeds, so a difference between designs can be told from the seeds' noise")
    p.add_argument("--out", default=None, metavar="DIR", help="where result.json goes (default sim-out/<scenario>)")
    p.add_argument("--placement-url", default=None, metavar="URL",
                   help="use a running Placement over HTTP instead of an in-process one on a temporary SQLite "
                        "file (the fleet is created in it; use a scratch Placement)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-html", action="store_true", help="skip the HTML report (it embeds plotly: ~5 MB)")
    p.add_argument("--baseline", default=None, metavar="BASELINE.json",
                   help="after the run, compare it with this earlier result (exit 1 when worse)")
    p.add_argument("--compare", nargs=2, default=None, metavar=("BASELINE.json", "CANDIDATE.json"),
                   help="compare two results without running anything (exit 1 when the candidate is worse)")
    p.add_argument("--judge-latency", action="store_true",
                   help="also judge wall-clock scheduler latency (p50/p99); only meaningful for two runs "
                        "on the same quiet machine. Default: shown, speed judged on Placement requests per build")
    p.add_argument("--latency-tolerance", type=float, default=None, metavar="FRACTION",
                   help="with --judge-latency: how much slower (p50/p99) the candidate may be (default 0.25); "
                        "implies --judge-latency")
    p.add_argument("--ignore-wall-clock", action="store_true",
                   help="the default now (latency is not judged); kept so older scripts still run")
    p.set_defaults(func=cmd_simulate)


def _usage(message: str) -> int:
    print(f"billeting simulate: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_simulate(args: argparse.Namespace) -> int:
    from billeting.sim import scenario as scenario_mod

    # Every flag is checked before anything is read, run or created.
    if args.latency_tolerance is not None and not args.latency_tolerance >= 0:
        return _usage("--latency-tolerance: a fraction >= 0, e.g. 0.25")
    if args.compare:
        if args.scenario:
            return _usage("--compare takes two result files and no scenario")
        return compare_and_report(*args.compare, latency=args.latency_tolerance,
                                  wall_clock=_judge_latency(args))
    if not args.scenario:
        return _usage("name a scenario file (or --compare BASELINE.json CANDIDATE.json)")
    seeds = None
    if args.seeds is not None:
        from billeting.sim.seeds import parse_seeds
        if args.seed is not None or args.baseline:
            return _usage("--seeds runs several seeds: it takes neither --seed nor --baseline")
        try:
            seeds = parse_seeds(args.seeds)
        except ValueError as exc:
            return _usage(f"--seeds: {exc}")
    if args.baseline and not Path(args.baseline).is_file():
        return _usage(f"--baseline {args.baseline}: no such file")
    if args.placement_url and not args.placement_url.startswith(("http://", "https://")):
        return _usage("--placement-url: expected http://HOST:PORT or https://...")
    try:
        scenarios = [_load(scenario_mod, args, seed) for seed in (seeds or [args.seed])]
    except scenario_mod.ScenarioError as exc:
        return _usage(str(exc))
    scenario = scenarios[0]
    out = Path(args.out) if args.out else Path("sim-out") / scenario.name
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _usage(f"--out {out}: {exc.strerror}")
    if seeds:
        return _over_seeds(scenarios, out, args)
    run = _simulate_or_say(scenario, args)
    if run is None:
        return 1
    status = hand_off(run, out, html=not args.no_html)
    if args.baseline:
        status = max(status, compare_and_report(args.baseline, str(out / "result.json"),
                                                    latency=args.latency_tolerance,
                                                    wall_clock=_judge_latency(args)))
    return status


def _load(scenario_mod, args: argparse.Namespace, seed: int | None):
    scenario = scenario_mod.load(args.scenario, seed=seed)
    if args.designs:
        wanted = [w.strip() for w in args.designs.split(",") if w.strip()]
        if not wanted:
            raise scenario_mod.ScenarioError("--designs: name at least one design")
        scenario = scenario_mod.select_designs(scenario, wanted)
    return scenario


def _simulate_or_say(scenario, args: argparse.Namespace):
    """The run, or None after one line on stderr when Placement failed."""
    from billeting.placement_client.client import PlacementError

    with terminate_as_exit():
        try:
            return _simulate(scenario, args.placement_url, quiet=args.quiet)
        except PlacementError as exc:
            # A Placement over HTTP that is not there, or refuses the fleet:
            # one line, not a traceback (in-process Placement raises nothing here).
            where = args.placement_url or "the in-process Placement"
            print(f"billeting simulate: error: Placement at {where}: {exc}", file=sys.stderr)
            return None


def _over_seeds(scenarios: list, out: Path, args: argparse.Namespace) -> int:
    """Run every seed (one after another, each written as it finishes), then
    the spread of every figure over them."""
    from billeting.sim import seeds, seeds_html

    runs, paths = [], []
    for scenario in scenarios:
        print(f"seed {scenario.seed}: running {len(scenario.designs)} design(s)", file=sys.stderr)
        run = _simulate_or_say(scenario, args)
        if run is None:
            return 1
        where = out / f"seed-{scenario.seed}"
        where.mkdir(parents=True, exist_ok=True)
        runs.append(finish(run, where))
        paths.append(str(where / "result.json"))
    spread = seeds.spread(runs, paths)
    path = out / "seeds.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(seeds.dump(spread))
    tmp.replace(path)
    print(seeds.render(spread), end="")
    print(f"\nwrote {path}")
    if not args.no_html:
        print(f"wrote {seeds_html.write(spread, out / 'report.html')}")
    return 1 if any(d.violations for r in runs for d in r.designs) else 0


@contextmanager
def terminate_as_exit():
    """SIGTERM (``timeout``, a CI runner) unwinds like Ctrl-C instead of
    killing the process outright, so the run's temporary databases (tens of
    MB each, in /dev/shm) are removed by their ``finally``."""
    def exit_now(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_now)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _simulate(scenario, placement_url: str | None, *, quiet: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from billeting.sim import runner

    console = Console(stderr=True)
    if quiet:
        return runner.run(scenario, placement_url=placement_url)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        current: dict[str, int] = {}

        def phase(text: str) -> None:
            progress.console.print(f"[dim]{text}[/dim]")

        def started(design, total: int) -> None:
            current["task"] = progress.add_task(f"{design.name:<24}", total=total)

        def advance(n: int) -> None:
            progress.advance(current["task"], n)

        return runner.run(scenario, placement_url=placement_url,
                          hooks=runner.Hooks(phase=phase, design_started=started, advance=advance))


# ======================================================================================
# OUTPUTS: where a finished RunResult is handed to everything that reads it.
# The terminal table (sim.table), the HTML report (sim.report_html), packing
# bounds (sim.packing.bounds, to fill DesignResult.packing) and the
# explanatory paragraph plug in HERE; for now it writes the JSON and prints
# a plain summary.
# ======================================================================================
def finish(run, out: Path):
    """Fill what is computed after the run (packing bounds) and write
    ``out/result.json``; returns the completed run."""
    import msgspec

    from billeting.sim import packing, results

    designs = []
    for d in run.designs:
        bound = packing.bounds(d.hosts, d.placements, groups=d.groups, seed=run.seed) if d.placements else None
        designs.append(msgspec.structs.replace(d, packing=bound))
    run = msgspec.structs.replace(run, designs=designs)
    path = out / "result.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(results.dump(run))
    tmp.replace(path)   # never a half-written result
    return run


def hand_off(run, out: Path, *, html: bool = True) -> int:
    """``finish`` the run, write the HTML report, print the table and the
    paragraph. Exit status 1 when the independent checker found a violation."""
    from billeting.sim import narrative, report_html, table

    run = finish(run, out)
    path = out / "result.json"
    print(table.render(run), end="")
    print()
    print(narrative.explain(run))
    print(f"\nwrote {path}")
    if html:
        print(f"wrote {report_html.write(run, out / 'report.html')}")
    violations = sum(len(d.violations) for d in run.designs)
    return 1 if violations else 0


def _judge_latency(args: argparse.Namespace) -> bool:
    return (args.judge_latency or args.latency_tolerance is not None) and not args.ignore_wall_clock


def compare_and_report(baseline: str, candidate: str, *, latency: float | None = None,
                       wall_clock: bool = False) -> int:
    from billeting.sim import compare

    tolerances = compare.Tolerances(wall_clock=wall_clock)
    if latency is not None:
        tolerances = compare.Tolerances(latency=latency, wall_clock=wall_clock)
    verdict = compare.compare_files(baseline, candidate, tolerances=tolerances)
    print(compare.render(verdict), end="")
    return compare.exit_status(verdict)


def summary(run) -> str:
    lines = [f"scenario {run.scenario} (seed {run.seed}): {run.hosts} hosts, {run.cells} cell(s), "
             f"{run.requests} requests"]
    head = f"{'design':<24} {'success':>8} {'errors':>6} {'upcalls':>7} {'409s':>6} {'PR/build':>8} " \
           f"{'p50 ms':>7} {'p99 ms':>7} {'TtA p50 s':>9} {'viol':>4} {'wall s':>7}"
    lines += [head, "-" * len(head)]
    for d in run.designs:
        lines.append(f"{d.name:<24} {d.success_rate * 100:>7.2f}% {d.errored:>6} {d.upcalls:>7} "
                     f"{d.claim_conflicts:>6} {d.placement_requests_per_build:>8.2f} "
                     f"{d.scheduler_latency_ms.p50:>7.1f} {d.scheduler_latency_ms.p99:>7.1f} "
                     f"{d.time_to_active_s.p50:>9.1f} {len(d.violations):>4} {d.wall_s:>7.1f}")
    for d in run.designs:
        for reason, n in d.error_reasons.items():
            lines.append(f"  {d.name}: {n} x {reason}")
        for v in d.violations[:5]:
            lines.append(f"  {d.name}: VIOLATION {v.kind} {v.level or ''} {v.detail}")
    return "\n".join(lines)
