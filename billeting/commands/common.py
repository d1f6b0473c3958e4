"""What every ``billeting`` command module shares: the operator-facing
errors and their exit statuses, the one-line argparse parser, logging set-up,
database URL handling and the start-up checks.

It sits below ``billeting.cli`` (which imports every command module to build
its parser) so the command modules can import these at module level instead
of reaching back up into ``cli``.  Keep it free of imports of command modules.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import re
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Protocol

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from billeting.config import Settings, SettingsError, default_db_url, load_settings, read_config_file
from billeting.serving import bind_address

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(Exception):
    """A failure the operator can fix; printed as one line."""

    exit_code = EXIT_FAILURE


class UsageError(CliError):
    """The command line or the configuration is wrong (exit status 2)."""

    exit_code = EXIT_USAGE


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def version() -> str:
    try:
        return importlib.metadata.version("billeting")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def given_flags(args: argparse.Namespace, settings_type: type) -> dict[str, object]:
    """The flags given on the command line that name a field of ``settings_type``
    (a dataclass): a flag's dest is the setting's name, so the parser is the one
    list of them. Flags left out (None) do not override the environment or file."""
    names = {f.name for f in fields(settings_type)}
    return {name: value for name, value in vars(args).items() if name in names and value is not None}


def settings_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Settings:
    flags = given_flags(args, Settings)
    try:
        return load_settings(flags, environ)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


# --- flags more than one service's commands take ------------------------------

def add_listen_flags(parser: argparse.ArgumentParser, *, port: int) -> None:
    """--host, --port, --workers, --threads of a ``serve`` (defaults None: the settings' own)."""
    parser.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help=f"port to listen on (default {port})")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default 1)")
    parser.add_argument("--threads", type=int, default=None, help="request threads per worker (default 4)")


def add_policy_flags(parser: argparse.ArgumentParser, *, rules: str) -> None:
    """--auth, --policy-file, --legacy-policy; ``rules``: whose rules a policy file overrides."""
    parser.add_argument("--auth", choices=("noauth2", "keystone"), default=None,
                        help="authentication strategy (default noauth2)")
    parser.add_argument("--policy-file", metavar="PATH", default=None,
                        help=f"oslo.policy YAML/JSON file overriding {rules} by name")
    parser.add_argument("--legacy-policy", action="store_true", default=None,
                        help="also accept the deprecated role:admin alternative of every base rule")


def add_schema_actions(commands, name: str, *, help: str, dest: str, schema: str,
                       add_flags: Callable[[argparse.ArgumentParser], None],
                       upgrade: Callable[[argparse.Namespace], int], status: Callable[[argparse.Namespace], int],
                       upgrade_help: str = "") -> None:
    """``NAME upgrade|status``: a database's migrations and its revision;
    ``schema`` names the database in the helps, ``add_flags`` says how each
    action finds it."""
    parser = commands.add_parser(name, help=help)
    actions = parser.add_subparsers(dest=dest, metavar="ACTION", parser_class=Parser)
    actions.required = True
    for action, func, action_help in (
            ("upgrade", upgrade, upgrade_help or f"apply the {schema} migrations"),
            ("status", status, f"show the {schema} revision; exit 1 when behind")):
        sub = actions.add_parser(action, help=action_help)
        add_flags(sub)
        sub.set_defaults(func=func)


@dataclass(slots=True)
class DatabaseTarget:
    url: str  # normalized, with the password
    shown: str  # for messages: password replaced by ***
    embedded: bool  # the per-user default SQLite file


def resolve_database(settings: Settings) -> DatabaseTarget:
    return database_target(settings.db or default_db_url(), embedded=not settings.db)


def database_target(raw: str, *, embedded: bool, what: str = "database") -> DatabaseTarget:
    """``raw`` normalized; an unsupported driver or a malformed URL is a usage error."""
    from billeting.common.db.engine import UnsupportedDatabase, normalize_url

    try:
        url = normalize_url(raw)
    except (ArgumentError, ValueError) as exc:
        if isinstance(exc, UnsupportedDatabase):
            raise UsageError(str(exc)) from None
        raise UsageError(f"invalid {what} URL {hide_password(raw)!r}: expected sqlite:///PATH, "
                       "postgresql+psycopg://USER@HOST/DB or mysql+pymysql://USER@HOST/DB") from None
    return DatabaseTarget(url=url, shown=hide_password(url), embedded=embedded)


def _sqlite_file(url: str) -> str | None:
    """The file behind an SQLite URL (None for other databases and in-memory ones)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def missing_sqlite_file(url: str) -> str | None:
    """The file behind an SQLite URL when it does not exist: connecting would
    create it, which read-only commands must not do."""
    sqlite_file = _sqlite_file(url)
    return sqlite_file if sqlite_file is not None and not os.path.exists(sqlite_file) else None


def hide_password(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)


def first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__


def connect_engine(target: DatabaseTarget, *, read_only: bool = False, what: str = "database") -> Engine:
    """An engine for ``target`` that has proven it can connect. ``read_only``:
    SQLite is opened without Billeting's connection settings, which would
    switch the file to WAL mode (a write). ``what`` names the database in
    the error."""
    from sqlalchemy import create_engine

    from billeting.common.db.engine import make_engine

    if read_only and _sqlite_file(target.url) is not None:
        engine = create_engine(target.url)
    else:
        engine = make_engine(target.url, pool_size=1)
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:
        engine.dispose()
        raise CliError(f"cannot connect to {what} {target.shown}: {first_line(exc)}") from None
    return engine


def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s",
                        force=True)
    if level != "DEBUG":
        # Alembic narrates every migration context at INFO; keep start-up readable.
        logging.getLogger("alembic").setLevel(logging.WARNING)


def read_revision(target: DatabaseTarget, current_revision: Callable[[Engine], str | None]) -> str | None:
    """``current_revision`` of ``target`` for the read-only ``status`` commands:
    None for an SQLite file that does not exist (nothing may be created), one
    line when the database cannot be read (e.g. a file that is not SQLite)."""
    if missing_sqlite_file(target.url):
        return None
    engine = connect_engine(target, read_only=True)
    try:
        return current_revision(engine)
    except DBAPIError as exc:
        raise CliError(f"cannot read database {target.shown}: {first_line(exc)}") from None
    finally:
        engine.dispose()


class Migrations(Protocol):
    """A database's Alembic wiring: Placement's store, the API database's, a cell's."""

    def upgrade(self, engine: Engine) -> None: ...

    def current_revision(self, engine: Engine) -> str | None: ...

    def head_revision(self) -> str: ...


def apply_migrations(engine: Engine, target: DatabaseTarget, migrations: Migrations) -> tuple[str | None, str]:
    """Upgrade ``target`` to head; returns (revision before, revision after)."""
    from alembic.util import CommandError

    before = migrations.current_revision(engine)
    try:
        migrations.upgrade(engine)
    except CommandError as exc:
        raise CliError(f"cannot upgrade {target.shown}: {exc} (is the database from a newer Billeting?)") from None
    except DBAPIError as exc:
        raise CliError(f"upgrading {target.shown} failed: {first_line(exc)}") from None
    return before, migrations.current_revision(engine) or ""


def ensure_schema(engine: Engine, target: DatabaseTarget, migrations: Migrations, *, label: str,
                  may_upgrade: bool, fix: str) -> None:
    """At start-up: the schema is at head, or is brought there when ``may_upgrade``;
    otherwise the error says how (``fix``: the command and its alternative)."""
    current, head = migrations.current_revision(engine), migrations.head_revision()
    if current == head:
        return
    if not may_upgrade:
        state = "empty (no schema)" if current is None else f"at revision {current}"
        raise CliError(f"{label} {target.shown} is {state} but this Billeting needs revision {head}; run {fix}")
    before, after = apply_migrations(engine, target, migrations)
    logging.getLogger("billeting").info("%s %s upgraded from %s to %s", label, target.shown, before or "empty", after)


def report_upgrade(label: str, shown: str, before: str | None, after: str) -> int:
    """What ``db upgrade`` prints; its exit status."""
    if before == after:
        print(f"{label} {shown} is already at revision {after}")
    else:
        print(f"{label} {shown} upgraded from {before or 'empty'} to revision {after}")
    return 0


def report_status(label: str, shown: str, current: str | None, head: str, fix: str) -> int:
    """What ``db status`` prints; its exit status (1 when behind)."""
    print(f"{label} {shown}: revision {current or 'none'}, head {head}"
          + ("" if current == head else f" (behind; run '{fix}')"))
    return 0 if current == head else EXIT_FAILURE


def check_listen(host: str, port: int) -> None:
    """Fail fast with one line when the address is unusable (gunicorn would retry for seconds)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
    except OSError as exc:
        raise CliError(f"cannot listen on {bind_address(host, port)}: {exc.strerror}") from None
    finally:
        probe.close()


def check_placement_url(url: str, what: str = "--placement-url") -> None:
    """A Placement endpoint that is no http(s) URL is a usage error, found
    before anything starts (not in a worker, as a traceback)."""
    from billeting.placement_client.transport import check_url

    try:
        check_url(url)
    except ValueError:
        raise UsageError(f"{what} {hide_password(url)!r}: expected http://HOST:PORT or https://HOST[:PORT][/PATH]") \
            from None


def check_keystone_config(settings: Settings) -> None:
    if not settings.config_file:
        raise UsageError("--auth keystone needs --config-file with a [keystone_authtoken] section")
    try:
        parser = read_config_file(settings.config_file)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    if not parser.has_section("keystone_authtoken"):
        raise UsageError(f"--auth keystone: {settings.config_file} has no [keystone_authtoken] section")
