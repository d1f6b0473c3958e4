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
                  "latency p99", "time to ACTIVE", "violations", "hosts in use / LP bound",
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
    cells = dict(rows(r))["hosts in use / LP bound / compaction"]
    assert cells[0] == ("not computed", False)
