"""``billeting simulate``: run a scenario's designs and write the result.

    billeting simulate SCENARIO.toml [--designs a,b] [--seed N] [--out DIR] [--placement-url URL]

Writes DIR/result.json (default DIR: ./sim-out/<scenario>) and prints a
summary. A bad scenario or flag is one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_USAGE = 2


def register(commands) -> None:
    p = commands.add_parser("simulate", help="compare scheduling designs on a simulated fleet and workload")
    p.add_argument("scenario", metavar="SCENARIO.toml", help="the scenario file (see scenarios/)")
    p.add_argument("--designs", default=None, metavar="A,B",
                   help="designs to run, by name or kind (legacy, conductor-claims, scheduler-claims); "
                        "default: every design of the scenario")
    p.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    p.add_argument("--out", default=None, metavar="DIR", help="where result.json goes (default sim-out/<scenario>)")
    p.add_argument("--placement-url", default=None, metavar="URL",
                   help="use a running Placement over HTTP instead of an in-process one on a temporary SQLite "
                        "file (the fleet is created in it; use a scratch Placement)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)


def _usage(message: str) -> int:
    print(f"billeting simulate: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_simulate(args: argparse.Namespace) -> int:
    from billeting.sim import scenario as scenario_mod

    try:
        scenario = scenario_mod.load(args.scenario, seed=args.seed)
        if args.designs:
            wanted = [w.strip() for w in args.designs.split(",") if w.strip()]
            if not wanted:
                return _usage("--designs: name at least one design")
            scenario = scenario_mod.select_designs(scenario, wanted)
    except scenario_mod.ScenarioError as exc:
        return _usage(str(exc))
    out = Path(args.out) if args.out else Path("sim-out") / scenario.name
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _usage(f"--out {out}: {exc.strerror}")
    if args.placement_url and not args.placement_url.startswith(("http://", "https://")):
        return _usage("--placement-url: expected http://HOST:PORT or https://...")
    run = _simulate(scenario, args.placement_url, quiet=args.quiet)
    return hand_off(run, out)


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
def hand_off(run, out: Path) -> int:
    from billeting.sim import results

    path = out / "result.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(results.dump(run))
    tmp.replace(path)   # never a half-written result
    print(summary(run))
    print(f"\nwrote {path}")
    violations = sum(len(d.violations) for d in run.designs)
    return 1 if violations else 0


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
