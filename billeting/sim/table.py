"""The designs side by side in the terminal: one row per figure, one column
per design, the best design on each row marked. Rich on a TTY, plain
aligned text otherwise (CI logs, pipes)."""
from __future__ import annotations

import io
import sys

from billeting.sim.figures import FIGURES, winners
from billeting.sim.results import RunResult

WIN = "*"   # plain-text mark of the best design on a row


def rows(run: RunResult) -> list[tuple[str, list[tuple[str, bool]]]]:
    """(figure label, [(cell text, is winner) per design]) for every figure."""
    out = []
    for fig in FIGURES:
        win = winners(fig, run.designs)
        out.append((fig.label, [(fig.show(d), i in win) for i, d in enumerate(run.designs)]))
    return out


def workload(run: RunResult) -> str:
    """Requests and the instances they asked for (a request may create
    several): the figures count instances, so both are said."""
    instances = max((d.requested for d in run.designs), default=0)
    return (f"{run.requests:,} request{'s' if run.requests != 1 else ''} for "
            f"{instances:,} instance{'s' if instances != 1 else ''}")


def _title(run: RunResult) -> str:
    return (f"{run.scenario}: {run.hosts:,} hosts in {run.cells} cell"
            f"{'s' if run.cells != 1 else ''}, {workload(run)}, seed {run.seed}")


def render(run: RunResult, *, color: bool | None = None, width: int | None = None) -> str:
    """The table as a string. ``color=None`` picks rich when stdout is a TTY."""
    if color is None:
        color = sys.stdout.isatty()
    return _rich(run, width) if color else _plain(run)


# How the hosts row reads, under the table and the HTML report's.
HOSTS_LEGEND = ("hosts row: in use / lower bound / upper bound on the fewest hosts, each tagged with how "
                "it was found (exact integer program, IP bound, LP relaxation, volume, heuristic, as placed); "
                "judged on in use / lower bound")


def _plain(run: RunResult) -> str:
    header = ["figure"] + [d.name for d in run.designs]
    body = [[label] + [text + (f" {WIN}" if win else "") for text, win in cells]
            for label, cells in rows(run)]
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join([r[0].ljust(widths[0])] +
                         [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()

    out = [_title(run), line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in body]
    out.append(f"{WIN} best on that row; {HOSTS_LEGEND}")
    out += [f"note: {n}" for n in run.notes]
    return "\n".join(out) + "\n"


def _rich(run: RunResult, width: int | None) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width, highlight=False)
    t = Table(title=escape(_title(run)), caption=f"bold green: best on that row; {HOSTS_LEGEND}")
    t.add_column("figure", style="cyan", no_wrap=True)
    for d in run.designs:
        t.add_column(escape(d.name), justify="right", no_wrap=True, min_width=len(d.name))
    for label, cells in rows(run):
        t.add_row(label, *[f"[bold green]{escape(text)} ✓[/]" if win else escape(text)
                           for text, win in cells])
    console.print(t)
    for n in run.notes:
        console.print(f"note: {escape(n)}")
    return buf.getvalue()
