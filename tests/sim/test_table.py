"""The terminal table of designs side by side."""
from billeting.sim.table import render, rows

from .factory import design, run, three_designs


def test_plain_table_has_every_design_and_figure_and_marks_winners():
    r = three_designs()
    out = render(r, color=False)
    for name in ("legacy", "conductor-claims", "scheduler-claims"):
        assert name in out
    for label in ("builds succeeded", "ended in ERROR", "attempts per build", "upcalls",
                  "claim conflicts", "Placement requests per build", "latency p50",
                  "latency p99", "time to ACTIVE", "violations", "hosts in use / lower / upper bound",
                  "stranded"):
        assert label in out
    line = next(ln for ln in out.splitlines() if ln.startswith("builds succeeded"))
    assert line.endswith("100.00% *")           # scheduler-claims wins
    line = next(ln for ln in out.splitlines() if ln.startswith("upcalls"))
    # The two cell designs tie at 0, but only the one that lost no builds is marked.
    assert line.count("*") == 1 and line.endswith("0 *")
    line = next(ln for ln in out.splitlines() if ln.startswith("hosts in use"))
    assert "112 / 101 / 106" in line and "105 / 101 / 104 *" in line
    assert "\x1b[" not in out                   # no escape codes when not a TTY


def test_all_equal_row_has_no_winner():
    out = render(run(design("a"), design("b")), color=False)
    line = next(ln for ln in out.splitlines() if ln.startswith("constraint violations"))
    assert "*" not in line


def test_rich_table_escapes_markup_in_names():
    out = render(run(design("[red]evil"), design("b", upcalls=3)), color=True, width=200)
    assert "[red]evil" in out


def test_missing_packing_shows_not_computed():
    from msgspec.structs import replace
    r = run(replace(design("a"), packing=None), design("b"))
    cells = dict(rows(r))["hosts in use / lower / upper bound"]
    assert cells[0] == ("not computed", False)


def test_hosts_row_says_how_each_bound_was_found():
    from msgspec.structs import replace

    from billeting.sim.packing import EXACT, HEURISTIC, LP
    from billeting.sim.results import PackingBound
    approx = replace(design("a"), packing=PackingBound(
        hosts_in_use=120, lp_bound=101, compaction=106, solver="s", lower_method=LP, upper_method=HEURISTIC))
    exact = replace(design("b"), packing=PackingBound(
        hosts_in_use=104, lp_bound=101, compaction=101, solver="s", lower_method=EXACT,
        upper_method=EXACT, exact=True))
    cells = dict(rows(run(approx, exact)))["hosts in use / lower / upper bound"]
    assert [text for text, _ in cells] == ["120 / 101 LP / 106 heuristic", "104 / 101 / 101 (exact)"]
