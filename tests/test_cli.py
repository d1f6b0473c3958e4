"""The ``billeting`` command: version, db upgrade/status, the schema check of
``serve``, one-line errors for bad input, and a real multi-worker server
that answers and stops on SIGTERM/SIGINT."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from billeting import cli
from billeting.placement.store import migrate, tables as t
from billeting.common.db.engine import normalize_url
from tests.concurrency.serve import Http, clean_environ, running_server, serve_command, stop, wait_until_up
from tests.concurrency.serve import RunningServer
from tests.support.ports import free_port

HEAD = migrate.head_revision()


def run_cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "billeting.cli", *args], capture_output=True, text=True,
                          env=env or clean_environ(), timeout=timeout)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The whole of stderr when a command fails: one line, no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def empty_sqlite(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'fresh.sqlite'}"


def revision_of(url: str) -> str | None:
    engine = create_engine(url)
    try:
        return migrate.current_revision(engine)
    finally:
        engine.dispose()


# --- version and parsing ------------------------------------------------------

def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == "billeting 0.1.0"


@pytest.mark.parametrize("args,message", [
    (["serve", "--port", "http"], "argument --port: invalid int value: 'http'"),
    (["serve", "--auth", "basic"], "argument --auth: invalid choice: 'basic'"),
    (["serve", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["db"], "the following arguments are required: ACTION"),
    ([], "the following arguments are required: COMMAND"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "--help" in err


@pytest.mark.parametrize("args,message", [
    (["serve", "--workers", "0"], "workers must be at least 1, not 0"),
    (["serve", "--workers", "99999999999"], "workers must be at most 1024, not 99999999999"),
    (["serve", "--threads", "5000"], "threads must be at most 1024, not 5000"),
    (["serve", "--port", "70000"], "port must be between 1 and 65535"),
    (["serve", "--db", "oracle://scott@db/orcl"], "unsupported database driver 'oracle'"),
    (["serve", "--db", "not a url"], "invalid database URL 'not a url'"),
    (["db", "status", "--db", "not a url"], "invalid database URL 'not a url'"),
    (["serve", "--auth", "keystone"], "--auth keystone needs --config-file"),
    (["serve", "--cors-origin", "http://ok.example/"], "invalid CORS origin 'http://ok.example/'"),
    (["serve", "--cors-origin", "http://ok.example", "--cors-allow-header", "Bad Header"],
     "invalid CORS header name 'Bad Header'"),
    (["serve", "--config-file", "/nonexistent/billeting.conf"],
     "cannot read config file /nonexistent/billeting.conf: No such file or directory"),
    (["db", "upgrade", "--config-file", "/nonexistent/billeting.conf"],
     "cannot read config file /nonexistent/billeting.conf: No such file or directory"),
])
def test_bad_settings_are_usage_errors_one_line_exit_2(capsys, tmp_path, args, message):
    # An empty-but-usable default DB location, so nothing touches the real home directory.
    args = [*args] if "--db" in args else [*args, "--db", f"sqlite:///{tmp_path / 'x.sqlite'}"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("billeting: error: ") and message in err, err
    assert not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize("args,message", [
    (["serve", "--db", "postgresql+psycopg://nobody:secret@127.0.0.1:1/none"],
     "cannot connect to database postgresql+psycopg://nobody:***@127.0.0.1:1/none"),
    (["db", "upgrade", "--db", "mysql+pymysql://root:pw@127.0.0.1:1/none"],
     "cannot connect to database mysql+pymysql://root:***@127.0.0.1:1/none"),
    (["serve", "--policy-file", "/nonexistent/policy.yaml"], "cannot read policy file /nonexistent/policy.yaml"),
])
def test_operator_errors_are_one_line_and_exit_1(capsys, tmp_path, args, message):
    args = [*args] if "--db" in args else [*args, "--db", f"sqlite:///{tmp_path / 'x.sqlite'}"]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("billeting: error: ") and message in err, err
    assert "secret" not in err and ":pw@" not in err


@pytest.mark.parametrize("text,message", [
    ("port = 9000\n", "line 1: a [section] header must come first, not 'port = 9000'"),
    ("[api]\nport 9000\n", "line 2: cannot parse 'port 9000' (expected 'name = value')"),
    ("[api]\nport = 1\nport = 2\n", "line 3: option 'port' repeated in section [api]"),
    ("[api]\n[api]\n", "line 2: section [api] repeated"),
    ("[api\nport = 1\n", "line 1: a [section] header must come first, not '[api'"),
])
def test_malformed_config_file_is_one_line_naming_file_and_line(tmp_path, text, message):
    conf = tmp_path / "billeting.conf"
    conf.write_text(text)
    result = run_cli("db", "status", "--config-file", str(conf))
    assert result.returncode == 2
    assert one_line_error(result) == f"billeting: error: {conf}, {message}"


def test_bad_value_in_config_file_names_file_section_and_option(tmp_path):
    conf = tmp_path / "billeting.conf"
    conf.write_text("[api]\nworkers = many\n")
    result = run_cli("serve", "--config-file", str(conf))
    assert result.returncode == 2
    assert one_line_error(result) == (f"billeting: error: {conf}: [api] workers: invalid value for workers: "
                                      "invalid literal for int() with base 10: 'many'")


def test_binary_config_file(tmp_path):
    conf = tmp_path / "billeting.conf"
    conf.write_bytes(b"\xff\xfe[api]\n")
    result = run_cli("db", "status", "--config-file", str(conf))
    assert (result.returncode, one_line_error(result)) == (
        2, f"billeting: error: cannot read config file {conf}: it is not UTF-8 text")


def test_bad_policy_file_is_reported(capsys, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("placement:usages: [unclosed\n")
    assert cli.main(["serve", "--db", f"sqlite:///{tmp_path / 'x.sqlite'}", "--policy-file", str(policy)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("billeting: error: invalid configuration:") and err.count("\n") == 1


def test_port_in_use_is_reported(capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["serve", "--port", str(port), "--db", f"sqlite:///{tmp_path / 'x.sqlite'}"]) == 1
    err = capsys.readouterr().err
    assert err == f"billeting: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_errors_from_the_real_command_have_no_traceback():
    result = run_cli("serve", "--db", "sqlite:////nonexistent-dir/x.sqlite")
    assert result.returncode == 1
    assert one_line_error(result).startswith(
        "billeting: error: cannot connect to database sqlite:////nonexistent-dir/x.sqlite:")
    result = run_cli("serve", env=clean_environ(BILLETING_WORKERS="lots"))
    assert result.returncode == 2
    assert one_line_error(result) == "billeting: error: invalid value for workers: " \
                                     "invalid literal for int() with base 10: 'lots'"


# --- db upgrade / status and the schema check -------------------------------

def test_db_upgrade_creates_schema_and_names_then_is_idempotent(empty_sqlite):
    first = run_cli("db", "upgrade", "--db", empty_sqlite)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"database {empty_sqlite} upgraded from empty to revision {HEAD}"
    assert revision_of(empty_sqlite) == HEAD
    engine = create_engine(empty_sqlite)
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(t.resource_classes)) > 10
        assert conn.scalar(select(func.count()).select_from(t.traits)) > 100
    engine.dispose()
    again = run_cli("db", "upgrade", "--db", empty_sqlite)
    assert again.returncode == 0
    assert again.stdout.strip() == f"database {empty_sqlite} is already at revision {HEAD}"
    status = run_cli("db", "status", "--db", empty_sqlite)
    assert status.returncode == 0
    assert status.stdout.strip() == f"database {empty_sqlite}: revision {HEAD}, head {HEAD}"


def test_serve_refuses_a_database_behind_with_the_fixing_command(empty_sqlite, capsys):
    assert cli.main(["serve", "--db", empty_sqlite]) == 1
    err = capsys.readouterr().err
    assert err == (f"billeting: error: database {empty_sqlite} is empty (no schema) but this Billeting "
                   f"needs revision {HEAD}; run 'billeting db upgrade --db {empty_sqlite}' "
                   "(or start serve with --auto-upgrade)\n")
    assert cli.main(["db", "status", "--db", empty_sqlite]) == 1
    assert "behind; run 'billeting db upgrade --db" in capsys.readouterr().out
    # The command it names really fixes it.
    assert cli.main(["db", "upgrade", "--db", empty_sqlite]) == 0
    assert revision_of(empty_sqlite) == HEAD


def test_db_status_with_the_embedded_default_creates_nothing(tmp_path):
    env = clean_environ(XDG_DATA_HOME=str(tmp_path / "data"), HOME=str(tmp_path / "home"))
    result = run_cli("db", "status", env=env)
    assert result.returncode == 1
    url = f"sqlite:///{tmp_path / 'data' / 'billeting' / 'placement.sqlite'}"
    assert result.stdout.strip() == f"database {url}: revision none, head {HEAD} (behind; run 'billeting db upgrade')"
    assert list(tmp_path.iterdir()) == []
    # db upgrade is the command that creates it.
    assert run_cli("db", "upgrade", env=env).returncode == 0
    assert run_cli("db", "status", env=env).returncode == 0


def test_db_status_of_a_missing_sqlite_file_creates_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'nowhere' / 'x.sqlite'}"
    assert cli.main(["db", "status", "--db", url]) == 1
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    assert cli.main(["db", "status", "--db", url]) == 1
    assert list(tmp_path.iterdir()) == []


def test_db_status_of_a_file_that_is_not_sqlite_is_one_line(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"\x8a\xff not a database " * 100)
    assert cli.main(["db", "status", "--db", f"sqlite:///{path}"]) == 1
    expected = f"billeting: error: cannot read database sqlite:///{path}: file is not a database\n"
    assert capsys.readouterr().err == expected


def test_db_status_leaves_an_sqlite_file_as_it_was(tmp_path):
    import sqlite3

    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    conn.execute("INSERT INTO alembic_version VALUES ('0001')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    assert cli.main(["db", "status", "--db", f"sqlite:///{path}"]) == 1
    assert path.read_bytes() == before  # not switched to WAL mode, nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]


def test_fixing_command_names_the_config_file_when_the_db_comes_from_it(empty_sqlite, tmp_path, capsys):
    conf = tmp_path / "billeting.conf"
    conf.write_text(f"[database]\nconnection = {empty_sqlite}\n")
    assert cli.main(["serve", "--config-file", str(conf)]) == 1
    assert f"run 'billeting db upgrade --config-file {conf}'" in capsys.readouterr().err


def test_serve_refuses_an_unknown_revision_and_upgrade_explains(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'future.sqlite'}"
    assert cli.main(["db", "upgrade", "--db", url]) == 0
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff_future'"))
    engine.dispose()
    capsys.readouterr()
    assert cli.main(["serve", "--db", url]) == 1
    assert "is at revision ffff_future but this Billeting needs revision" in capsys.readouterr().err
    assert cli.main(["db", "upgrade", "--db", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"billeting: error: cannot upgrade {url}:") and "newer Billeting" in err
    assert err.count("\n") == 1


def test_db_upgrade_on_the_test_backend_is_a_no_op(db_url, engine):
    result = run_cli("db", "upgrade", "--db", db_url)
    assert result.returncode == 0, result.stderr
    shown = make_url(normalize_url(db_url)).render_as_string(hide_password=True)
    assert result.stdout.strip() == f"database {shown} is already at revision {HEAD}"


# --- a real server ------------------------------------------------------------

def test_serve_with_two_workers_answers_and_stops_on_sigterm(db_url, engine):
    with running_server(db_url, workers=2) as server:
        http = Http(server.url, mv="1.0")
        status, body = http.request("GET", "/")
        assert status == 200 and body["versions"][0]["max_version"] == "1.39"
        status, body = http.request("POST", "/resource_providers", {"name": "served"})
        assert status == 201 or status == 200  # 201 with an empty body before 1.20
        status, body = http.request("GET", "/resource_providers")
        assert status == 200 and [rp["name"] for rp in body["resource_providers"]] == ["served"]
        http.close()
        # It stops (within stop()'s generous deadline): how fast is measured
        # and reported, never asserted (README: serving).
        assert stop(server, signal.SIGTERM) == 0
        log = server.log()
    assert "Booting worker" in log and log.count("Booting worker") == 2
    assert "ready: http://127.0.0.1:" in log


def test_serve_creates_and_migrates_the_embedded_default_and_stops_on_sigint(tmp_path):
    data_home = tmp_path / "xdg"
    port = free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(serve_command("--port", str(port), "--workers", "1"), stdout=log,
                                   stderr=subprocess.STDOUT,
                                   env=clean_environ(XDG_DATA_HOME=str(data_home)))
    server = RunningServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_until_up(server)
        http = Http(server.url)
        status, body = http.request("GET", "/traits?name=startswith:HW_CPU_X86_AVX")
        http.close()
    finally:
        code = stop(server, signal.SIGINT)
    database = data_home / "billeting" / "placement.sqlite"
    assert database.exists()
    assert revision_of(f"sqlite:///{database}") == HEAD
    assert code == 0, server.log()
    if status != 404:  # the traits API is written by another module
        assert status == 200 and "HW_CPU_X86_AVX" in body["traits"]


def test_serve_auto_upgrade_migrates_a_fresh_database(empty_sqlite):
    with running_server(empty_sqlite, workers=1, args=("--auto-upgrade",)) as server:
        assert Http(server.url).request("GET", "/resource_providers")[0] == 200
    assert revision_of(empty_sqlite) == HEAD


def test_every_command_module_is_a_registered_group():
    # One module per command group under billeting/commands, each adding its
    # sub-commands through register(commands); cli.py lists them all.
    import importlib
    import pkgutil

    import billeting.commands

    helpers = {"common", "pools"}
    modules = {m.name for m in pkgutil.iter_modules(billeting.commands.__path__)} - helpers
    assert modules == set(cli.GROUPS)
    for name in cli.GROUPS:
        assert callable(importlib.import_module(f"billeting.commands.{name}").register), name
