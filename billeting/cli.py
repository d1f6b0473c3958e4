"""The ``billeting`` command: serve the Placement API and manage its database.

    billeting serve [--host H] [--port P] [--db URL] [--workers N] ...
    billeting db upgrade [--db URL]
    billeting db status [--db URL]
    billeting placement export|import|audit ...   (billeting/placement/tools/)
    billeting scheduler serve|db …, billeting topology …   (see billeting/cli_scheduler.py)
    billeting compute --host H --cell C --driver fake ...   (billeting.compute.command)
    billeting conductor --cell C ...                         (billeting.conductor.command)
    billeting cell-db upgrade|status --cell-db URL           (billeting.cells.command)
    billeting audit --cell C=URL ...                         (billeting.cells.command)
    billeting --version

Every failure the operator can fix ends in one line on stderr and a
non-zero exit status, never a traceback: 2 for usage errors (a bad flag,
setting value, config file or database URL: anything wrong before the
network or the database is touched), 1 for the rest (unreachable or
outdated database, unreadable or invalid policy file, port in use).
Read-only commands (the ``status`` commands, the audits) create no files.
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
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from billeting.cli_pools import add_pool_flags, apply_pool_flags
from billeting.config import (Settings, SettingsError, default_db_url, ensure_default_data_dir, load_settings,
                              read_config_file)
from billeting.placement.tools.errors import ToolError
from billeting.serving import bind_address

LOG = logging.getLogger("billeting")

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(Exception):
    """A failure the operator can fix; printed as one line."""

    exit_code = EXIT_FAILURE


class UsageError(CliError):
    """The command line or the configuration is wrong (exit status 2)."""

    exit_code = EXIT_USAGE


# --- parsing ----------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _version() -> str:
    try:
        return importlib.metadata.version("billeting")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-file", metavar="PATH", default=None,
                        help="INI config file (flags and BILLETING_* variables take precedence)")
    parser.add_argument("--db", metavar="URL", default=None,
                        help="sqlite:///PATH, postgresql+psycopg://USER[:PW]@HOST/DB or "
                             "mysql+pymysql://USER[:PW]@HOST/DB (default: embedded SQLite)")
    parser.add_argument("--log-level", default=None, metavar="LEVEL",
                        help="DEBUG, INFO (default), WARNING or ERROR")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="billeting", description="Billeting: a Placement-compatible control plane.")
    parser.add_argument("--version", action="version", version=f"billeting {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    serve = commands.add_parser("serve", help="serve the Placement API (foreground, until SIGTERM/SIGINT)")
    _add_common(serve)
    serve.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to listen on (default 8778)")
    serve.add_argument("--workers", type=int, default=None, help="worker processes (default 1)")
    serve.add_argument("--threads", type=int, default=None, help="request threads per worker (default 4)")
    serve.add_argument("--header-timeout", type=float, metavar="SECONDS", default=None,
                       help="time a client gets to send its request line and headers (default 10)")
    serve.add_argument("--body-timeout", type=float, metavar="SECONDS", default=None,
                       help="time a client gets to send a request body (default 30)")
    serve.add_argument("--keepalive-timeout", type=float, metavar="SECONDS", default=None,
                       help="idle keep-alive connections are closed after this (default 5)")
    serve.add_argument("--graceful-timeout", type=float, metavar="SECONDS", default=None,
                       help="on SIGTERM/SIGINT, time given to requests in flight (default 10)")
    serve.add_argument("--max-body-size", type=int, metavar="BYTES", default=None,
                       help="larger request bodies get 413 (default 4194304)")
    serve.add_argument("--auth", choices=("noauth2", "keystone"), default=None,
                       help="authentication strategy (default noauth2)")
    serve.add_argument("--policy-file", metavar="PATH", default=None,
                       help="oslo.policy YAML/JSON file overriding rules by name")
    serve.add_argument("--legacy-policy", action="store_true", default=None,
                       help="also accept the deprecated role:admin alternative of every base rule")
    serve.add_argument("--cors-origin", dest="cors_origins", metavar="ORIGIN", nargs="+",
                       action="extend", default=None, help="enable CORS for these origins")
    serve.add_argument("--cors-allow-header", dest="cors_allow_headers", metavar="NAME", nargs="+",
                       action="extend", default=None, help="extra request headers CORS allows")
    serve.add_argument("--metrics-access", choices=("open", "policy"), default=None,
                       help="GET /metrics for anyone (open, default) or for callers the "
                            "billeting:metrics policy rule admits")
    serve.add_argument("--auto-upgrade", action="store_true", default=None,
                       help="apply pending schema migrations instead of refusing to start")
    add_pool_flags(serve)
    serve.set_defaults(func=cmd_serve)

    db = commands.add_parser("db", help="manage the database schema")
    db_commands = db.add_subparsers(dest="db_command", metavar="ACTION", parser_class=_Parser)
    db_commands.required = True
    upgrade = db_commands.add_parser("upgrade", help="apply the schema migrations and sync standard names")
    _add_common(upgrade)
    upgrade.set_defaults(func=cmd_db_upgrade)
    status = db_commands.add_parser("status", help="show the schema revision; exit 1 when behind")
    _add_common(status)
    status.set_defaults(func=cmd_db_status)

    from billeting.placement.tools.cli import add_commands as add_placement_commands

    add_placement_commands(commands, _add_common)
    from billeting import cli_scheduler  # billeting scheduler …, billeting topology …

    cli_scheduler.register(commands)
    # The cell side: computes, the cell conductor, cell databases, the audit.
    from billeting.cells import command as cell_command
    from billeting.compute import command as compute_command
    from billeting.conductor import command as conductor_command
    from billeting.conductor import super_command

    compute_command.add_parser(commands)
    conductor_command.add_parser(commands)
    super_command.add_parser(commands)
    cell_command.add_parsers(commands)
    # The control plane: the compute API (with its super conductor) and the all-in-one.
    from billeting import up
    from billeting.api.compute import command as compute_api_command

    compute_api_command.add_parser(commands)
    up.add_parser(commands)

    from billeting.sim import cli as sim_cli  # billeting simulate …

    sim_cli.register(commands)
    return parser


_FLAG_NAMES = ("config_file", "db", "log_level", "host", "port", "workers", "threads", "header_timeout",
               "body_timeout", "keepalive_timeout", "graceful_timeout", "max_body_size", "auth",
               "policy_file", "legacy_policy", "cors_origins", "cors_allow_headers", "auto_upgrade",
               "metrics_access")


def settings_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Settings:
    flags = {name: getattr(args, name) for name in _FLAG_NAMES if getattr(args, name, None) is not None}
    try:
        return load_settings(flags, environ)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


# --- database ---------------------------------------------------------------

@dataclass(slots=True)
class DatabaseTarget:
    url: str  # normalized, with the password
    shown: str  # for messages: password replaced by ***
    embedded: bool  # the per-user default SQLite file


def resolve_database(settings: Settings) -> DatabaseTarget:
    return database_target(settings.db or default_db_url(), embedded=not settings.db)


def database_target(raw: str, *, embedded: bool, what: str = "database") -> DatabaseTarget:
    """``raw`` normalized; an unsupported driver or a malformed URL is a usage error."""
    from billeting.placement.store.engine import UnsupportedDatabase, normalize_url

    try:
        url = normalize_url(raw)
    except (ArgumentError, ValueError) as exc:
        if isinstance(exc, UnsupportedDatabase):
            raise UsageError(str(exc)) from None
        raise UsageError(f"invalid {what} URL {_hide_password(raw)!r}: expected sqlite:///PATH, "
                       "postgresql+psycopg://USER@HOST/DB or mysql+pymysql://USER@HOST/DB") from None
    return DatabaseTarget(url=url, shown=_hide_password(url), embedded=embedded)


def prepare_embedded(target: DatabaseTarget) -> None:
    """Create the data directory of the embedded database (commands that
    write only: ``db status`` must not create anything)."""
    if not target.embedded:
        return
    try:
        ensure_default_data_dir()
    except OSError as exc:
        raise CliError(f"cannot create the data directory for {target.shown}: {exc.strerror}") from None


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


def _hide_password(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__


def connect_engine(target: DatabaseTarget, *, read_only: bool = False) -> Engine:
    """An engine for ``target`` that has proven it can connect. ``read_only``:
    SQLite is opened without Billeting's connection settings, which would
    switch the file to WAL mode (a write)."""
    from sqlalchemy import create_engine

    from billeting.placement.store.engine import make_engine

    if read_only and _sqlite_file(target.url) is not None:
        engine = create_engine(target.url)
    else:
        engine = make_engine(target.url, pool_size=1)
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:
        engine.dispose()
        raise CliError(f"cannot connect to database {target.shown}: {_first_line(exc)}") from None
    return engine


def upgrade_command(target: DatabaseTarget, settings: Settings, *, db_flag_given: bool) -> str:
    """The exact command that brings this database up to date (password hidden)."""
    if target.embedded:
        return "billeting db upgrade"
    if settings.config_file and not db_flag_given:
        return f"billeting db upgrade --config-file {settings.config_file}"
    return f"billeting db upgrade --db {target.shown}"


def apply_migrations(engine: Engine, target: DatabaseTarget) -> tuple[str | None, str]:
    """Upgrade to head; returns (revision before, revision after)."""
    from alembic.util import CommandError

    from billeting.placement.store import migrate

    before = migrate.current_revision(engine)
    try:
        migrate.upgrade(engine)
    except CommandError as exc:
        raise CliError(f"cannot upgrade {target.shown}: {exc} "
                       "(is the database from a newer Billeting?)") from None
    except DBAPIError as exc:
        raise CliError(f"upgrading {target.shown} failed: {_first_line(exc)}") from None
    return before, migrate.current_revision(engine) or ""


def ensure_schema(engine: Engine, target: DatabaseTarget, *, may_upgrade: bool, fix: str) -> None:
    from billeting.placement.store import migrate

    current, head = migrate.current_revision(engine), migrate.head_revision()
    if current == head:
        return
    if not may_upgrade:
        state = "empty (no schema)" if current is None else f"at revision {current}"
        raise CliError(
            f"database {target.shown} is {state} but this Billeting needs revision {head}; "
            f"run '{fix}' (or start serve with --auto-upgrade)")
    before, after = apply_migrations(engine, target)
    LOG.info("database %s upgraded from %s to %s", target.shown, before or "empty", after)


def sync_names(engine: Engine, target: DatabaseTarget) -> None:
    from billeting.placement.store.sync import sync_standard_names
    from billeting.placement.store.tx import RetriesExhausted

    try:
        sync_standard_names(engine)
    except (DBAPIError, RetriesExhausted) as exc:
        raise CliError(f"syncing standard resource classes and traits into {target.shown} failed: "
                       f"{_first_line(exc)}") from None


# --- commands ---------------------------------------------------------------

def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s",
                        force=True)
    if level != "DEBUG":
        # Alembic narrates every migration context at INFO; keep start-up readable.
        logging.getLogger("alembic").setLevel(logging.WARNING)


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure_logging(settings.log_level)
    target = resolve_database(settings)
    prepare_embedded(target)
    engine = connect_engine(target)
    try:
        before, after = apply_migrations(engine, target)
        sync_names(engine, target)
    finally:
        engine.dispose()
    if before == after:
        print(f"database {target.shown} is already at revision {after}")
    else:
        print(f"database {target.shown} upgraded from {before or 'empty'} to revision {after}")
    return 0


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
        raise CliError(f"cannot read database {target.shown}: {_first_line(exc)}") from None
    finally:
        engine.dispose()


def cmd_db_status(args: argparse.Namespace) -> int:
    from billeting.placement.store import migrate

    settings = settings_from_args(args)
    target = resolve_database(settings)
    head = migrate.head_revision()
    current = read_revision(target, migrate.current_revision)
    print(f"database {target.shown}: revision {current or 'none'}, head {head}"
          + ("" if current == head else
             f" (behind; run '{upgrade_command(target, settings, db_flag_given=args.db is not None)}')"))
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
        raise UsageError(f"{what} {_hide_password(url)!r}: expected http://HOST:PORT or https://HOST[:PORT][/PATH]") \
            from None


def check_app(settings: Settings) -> None:
    """Build the WSGI stack once in the master so a bad policy, keystone or
    CORS configuration stops start-up with a message, not a worker crash loop."""
    from billeting.placement.api.app import make_app
    from billeting.placement.store.engine import make_engine

    from billeting.placement.api.cors import check_header_name, check_origin

    try:
        for origin in settings.cors_origins:
            check_origin(origin)
        for name in settings.cors_allow_headers:
            check_header_name(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if settings.auth == "keystone":
        check_keystone_config(settings)
    if settings.policy_file:
        try:
            with open(settings.policy_file, encoding="utf-8"):
                pass
        except OSError as exc:
            raise CliError(f"cannot read policy file {settings.policy_file}: {exc.strerror}") from None
    engine = make_engine(settings.db_url, pool_size=1)  # never connects here
    try:
        make_app(settings, engine)
    except ValueError as exc:  # our own validation (CORS origins, policy file syntax)
        raise CliError(f"invalid configuration: {_first_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - any configuration failure, reported in one line
        raise CliError(f"invalid configuration: {type(exc).__name__}: {_first_line(exc)}") from None
    finally:
        engine.dispose()


def check_keystone_config(settings: Settings) -> None:
    if not settings.config_file:
        raise UsageError("--auth keystone needs --config-file with a [keystone_authtoken] section")
    try:
        parser = read_config_file(settings.config_file)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    if not parser.has_section("keystone_authtoken"):
        raise UsageError(f"--auth keystone: {settings.config_file} has no [keystone_authtoken] section")


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure_logging(settings.log_level)
    target = resolve_database(settings)
    settings.db = target.url  # workers open exactly what the master checked
    check_app(settings)
    check_listen(settings.host, settings.port)
    prepare_embedded(target)
    engine = connect_engine(target)
    try:
        # The embedded default is created and migrated on first start.
        ensure_schema(engine, target, may_upgrade=settings.auto_upgrade or target.embedded,
                      fix=upgrade_command(target, settings, db_flag_given=args.db is not None))
        # Once, in the master, before forking: workers find the names in place.
        sync_names(engine, target)
    finally:
        engine.dispose()

    from billeting.placement.api.policy import describe as describe_policy

    LOG.info("policy: %s", describe_policy(legacy=settings.legacy_policy, enforce_scope=settings.enforce_scope))
    LOG.info("billeting %s: Placement API on http://%s/ (db %s, %d worker(s) x %d thread(s), auth %s%s)",
             _version(), bind_address(settings.host, settings.port), target.shown, settings.workers,
             settings.threads, settings.auth,
             f", CORS for {', '.join(settings.cors_origins)}" if settings.cors_origins else "")
    from billeting.placement import serve

    serve.run(settings)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        apply_pool_flags(args)
    except ValueError as exc:
        print(f"billeting: error: {exc}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (CliError, ToolError) as exc:
        print(f"billeting: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # ``python -m billeting.cli``: run the imported module's main, so the
    # commands that raise ``billeting.cli.CliError`` are caught as such.
    from billeting.cli import main as _main

    sys.exit(_main())
