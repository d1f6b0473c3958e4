"""The per-cell health guard (``billeting.cells.health``): a cell that
refuses or hangs is answered for at once while it is skipped, probed by one
caller at a time after the skip window, and back on the first read that
works."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from billeting.apidb.cell_directory import with_connect_timeout
from billeting.cells.health import CellHealth, CellUnavailable, HealthSettings
from tests.cells.silent_server import SilentServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused() -> None:
    raise OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))


def test_a_refusing_cell_is_skipped_then_probed_then_back():
    clock = Clock()
    health = CellHealth(HealthSettings(timeout_s=1.0, skip_s=5.0), clock=clock)
    changes = []
    health.on_change(lambda cell, up, reason: changes.append((cell, up)))
    with pytest.raises(CellUnavailable) as info:
        health.call("cell2", refused)
    assert info.value.cell == "cell2" and health.is_down("cell2")
    calls = []

    def works():
        calls.append(1)
        return "rows"

    # Within the skip window nobody touches the cell.
    clock.now += 4.0
    with pytest.raises(CellUnavailable):
        health.call("cell2", works)
    assert calls == []
    # Other cells are not affected.
    assert health.call("cell1", lambda: 1) == 1
    # After it, one read probes; it works, so the cell is back.
    clock.now += 1.5
    assert health.call("cell2", works) == "rows"
    assert calls == [1] and not health.is_down("cell2") and health.down_cells() == frozenset()
    assert changes == [("cell2", False), ("cell2", True)]


def test_errors_that_are_not_an_outage_pass_through_and_leave_the_cell_up():
    health = CellHealth()

    def bug():
        raise KeyError("a bug, not an outage")

    with pytest.raises(KeyError):
        health.call("cell1", bug)
    with pytest.raises(KeyError):
        health.call("cell1", bug, deadline=False)
    assert not health.is_down("cell1")


def test_a_write_runs_on_the_callers_thread_and_marks_the_cell_down_when_refused():
    health = CellHealth()
    assert health.call("cell1", threading.current_thread, deadline=False) is threading.current_thread()
    with pytest.raises(CellUnavailable):
        health.call("cell1", refused, deadline=False)
    assert health.is_down("cell1")


def test_a_failed_probe_keeps_skipping_and_only_one_caller_probes():
    clock = Clock()
    health = CellHealth(HealthSettings(timeout_s=0.5, skip_s=2.0), clock=clock)
    with pytest.raises(CellUnavailable):
        health.call("cell2", refused)
    clock.now += 2.5
    started, release = threading.Event(), threading.Event()
    probes = []

    def slow_probe():
        probes.append(1)
        started.set()
        release.wait(5)
        return "ok"

    with ThreadPoolExecutor(1) as pool:
        probe = pool.submit(health.call, "cell2", slow_probe)
        assert started.wait(5)
        # While the probe runs, everyone else is told at once.
        with pytest.raises(CellUnavailable):
            health.call("cell2", slow_probe)
        release.set()
        try:
            probe.result(5)
        except CellUnavailable:
            pass  # (the probe may have hit its deadline on a slow machine)
    assert probes == [1]


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


@pytest.mark.parametrize("driver", ["postgresql+psycopg", "mysql+pymysql"])
def test_a_database_that_hangs_costs_one_deadline_then_is_skipped(silent, driver):
    engine = create_engine(with_connect_timeout(f"{driver}://u:p@127.0.0.1:{silent.port}/db", seconds=30))
    health = CellHealth(HealthSettings(timeout_s=0.5, skip_s=30.0))

    def read():
        with engine.connect() as conn:
            return conn.execute(text("SELECT 1")).scalar()

    try:
        began = time.monotonic()
        with pytest.raises(CellUnavailable) as info:
            health.call("cell2", read)
        # Well before the driver's own 30 s timeout: the guard stopped waiting.
        assert time.monotonic() - began < 10
        assert "no answer" in info.value.reason
        # Ten concurrent callers now: none opens a connection, none waits for one.
        connections = len(silent.accepted)
        with ThreadPoolExecutor(10) as pool:
            outcomes = list(pool.map(lambda _: _outcome(health, read), range(10)))
        assert outcomes == ["unavailable"] * 10
        assert len(silent.accepted) == connections
    finally:
        silent.close()  # (the abandoned read then fails and its thread ends)
        engine.dispose()


def _outcome(health: CellHealth, read) -> str:
    try:
        health.call("cell2", read)
    except CellUnavailable:
        return "unavailable"
    return "answered"


def test_the_abandoned_read_of_a_hung_cell_blocks_new_probes_until_it_returns():
    clock = Clock()
    health = CellHealth(HealthSettings(timeout_s=0.2, skip_s=0.0), clock=clock)
    release = threading.Event()
    finished = threading.Event()

    def hangs():
        release.wait(10)
        finished.set()
        return "late"

    with pytest.raises(CellUnavailable):
        health.call("cell2", hangs)
    clock.now += 10  # (the skip window, zero here, is long past)
    calls = []
    with pytest.raises(CellUnavailable):
        health.call("cell2", lambda: calls.append(1))
    assert calls == []
    release.set()
    assert finished.wait(5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # (the abandoned thread accounts for itself after returning)
        try:
            assert health.call("cell2", lambda: "now") == "now"
            break
        except CellUnavailable:
            time.sleep(0.05)
    assert not health.is_down("cell2")


def test_connect_timeouts_are_added_to_server_databases_only():
    assert "connect_timeout=3" in with_connect_timeout("postgresql+psycopg://u@h/db")
    assert "connect_timeout=9" in with_connect_timeout("mysql+pymysql://u@h/db?connect_timeout=9")
    assert with_connect_timeout("sqlite:///x.sqlite") == "sqlite:///x.sqlite"
