"""``billeting compute-api cell add | image add | serve``: operator mistakes
are one line on stderr (exit 2 for usage, 1 for a database that cannot be
used), never a traceback, and never a cell mapping that would stop every
scheduler and compute API reading it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from billeting import cli
from billeting.apidb import cell_mappings
from billeting.apidb.engine import make_engine
from tests.conftest import one_line
from tests.support.ports import free_port


@pytest.fixture
def not_sqlite(tmp_path) -> str:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"\x8a\xff not a database " * 100)
    return f"sqlite:///{path}"


@pytest.mark.parametrize("args, status, expected", [
    (["cell", "add", "cell0", "--db", "nonsense", "--cell-db", "sqlite://"], 2, "invalid API database URL"),
    (["cell", "add", "cell0", "--db", "postgresql+psycopg://u:secret@127.0.0.1:1/x", "--cell-db", "sqlite://"],
     1, "cannot use the API database"),
    (["cell", "add", "cell0", "--db", "NOT_SQLITE", "--cell-db", "sqlite://"], 1, "file is not a database"),
    (["cell", "add", "cell0", "--db", "API", "--cell-db", "nonsense"], 1, "invalid cell database URL"),
    (["cell", "add", "cell0", "--db", "API", "--cell-db", "NOT_SQLITE"], 1, "file is not a database"),
    (["cell", "add", "cell1", "--db", "API", "--cell-db", "sqlite://", "--transport-url", "rabbit"], 2,
     "--transport-url 'rabbit': expected amqp://"),
    (["cell", "add", " ", "--db", "API", "--cell-db", "sqlite://"], 2, "cell name ' ': must not be empty"),
    (["image", "add", "", "--db", "API"], 2, "image id '': must not be empty"),
    (["image", "add", "cirros", "--db", "NOT_SQLITE"], 1, "file is not a database"),
    (["image", "add", "cirros", "--db", "API", "--disk-format", " "], 2, "disk format ' ': must not be empty"),
    (["serve", "--db", "API", "--workers", "0"], 2, "workers must be at least 1"),
    (["serve", "--db", "API", "--workers", "99999999999"], 2, "workers must be at most 1024"),
    (["serve", "--db", "API", "--port", "-5"], 2, "--port must be between 1 and 65535"),
    (["serve", "--db", "API", "--log-level", "LOUD"], 2, "--log-level LOUD"),
])
def test_operator_mistakes_are_one_line(tmp_path, not_sqlite, capsys, args, status, expected):
    api = f"sqlite:///{tmp_path / 'api.sqlite'}"
    args = [{"API": api, "NOT_SQLITE": not_sqlite}.get(a, a) for a in args]
    assert cli.main(["compute-api", *args]) == status
    line = one_line(capsys)
    assert expected in line and "secret" not in line


def test_a_refused_transport_url_maps_nothing(tmp_path, capsys):
    api = f"sqlite:///{tmp_path / 'api.sqlite'}"
    cell_db = f"sqlite:///{tmp_path / 'cell1.sqlite'}"
    assert cli.main(["compute-api", "cell", "add", "cell1", "--db", api, "--cell-db", cell_db,
                     "--transport-url", "rabbit"]) == 2
    assert cli.main(["compute-api", "cell", "add", "cell1", "--db", api, "--cell-db", cell_db,
                     "--transport-url", "amqp://guest:guest@127.0.0.1:5672/cell1"]) == 0
    assert "cell cell1" in capsys.readouterr().out
    engine = make_engine(api)
    try:
        assert [c.transport_url for c in cell_mappings.listing(engine)] == ["amqp://guest:guest@127.0.0.1:5672/cell1"]
    finally:
        engine.dispose()


def test_an_image_keeps_its_disk_format_for_the_scheduler(tmp_path, capsys):
    from billeting.apidb import images
    from billeting.scheduler.nova import Image

    api = f"sqlite:///{tmp_path / 'api.sqlite'}"
    assert cli.main(["compute-api", "image", "add", "win", "--db", api, "--disk-format", "vhd",
                     "--property", "os_type=windows"]) == 0
    assert cli.main(["compute-api", "image", "add", "plain", "--db", api]) == 0
    assert "image win added" in capsys.readouterr().out
    engine = make_engine(api)
    try:
        assert images.get(engine, "win").scheduler_image() == Image(id="win", disk_format="vhd",
                                                                    properties={"os_type": "windows"})
        assert images.get(engine, "plain").disk_format is None
    finally:
        engine.dispose()


def _run(*args: str) -> subprocess.CompletedProcess:
    """A ``billeting`` command in a process of its own: one that wrongly
    started serving is stopped by the timeout, and fails the test."""
    from tests.concurrency.serve import clean_environ

    return subprocess.run([sys.executable, "-m", "billeting.cli", *args], capture_output=True, text=True,
                          timeout=20, env=clean_environ(), cwd=Path(__file__).resolve().parents[3])


@pytest.mark.parametrize("command, url", [
    (["compute-api", "serve", "--db", "API", "--port", "PORT"], "not-a-url"),
    (["scheduler", "serve", "--db", "API", "--port", "PORT", "--auto-upgrade"], "http://:8778"),
    (["super-conductor", "--db", "API", "--transport-url", "amqp://guest:guest@127.0.0.1:5672/"], "ftp://h/"),
    (["conductor", "--cell-db", "CELL", "--auto-upgrade"], "http://127.0.0.1:99999"),
    (["compute", "--host", "h1", "--cell-db", "CELL", "--auto-upgrade"], "127.0.0.1:8778"),
])
def test_a_placement_url_that_is_no_http_url_is_a_usage_error_before_anything_starts(tmp_path, command, url):
    given = {"API": f"sqlite:///{tmp_path / 'api.sqlite'}", "CELL": f"sqlite:///{tmp_path / 'cell1.sqlite'}",
             "PORT": str(free_port())}
    done = _run(*[given.get(a, a) for a in command], "--placement-url", url)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "expected http://HOST:PORT" in lines[0] and repr(url) in lines[0], done.stderr
    assert list(tmp_path.iterdir()) == []  # no database was opened


def test_compute_api_serve_exits_when_placement_does_not_answer(tmp_path):
    # README: the services check Placement at start-up and exit without it.
    done = _run("compute-api", "serve", "--db", f"sqlite:///{tmp_path / 'api.sqlite'}", "--port", str(free_port()),
                "--placement-url", "http://127.0.0.1:9")
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "cannot reach Placement at http://127.0.0.1:9" in lines[0], done.stderr
