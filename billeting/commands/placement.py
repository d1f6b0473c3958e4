"""``billeting serve`` and ``billeting db upgrade|status``: the Placement API and its database.

Every failure the operator can fix ends in one line on stderr and a non-zero
exit status (see ``billeting.cli``).
"""
from __future__ import annotations

import argparse
import logging

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from billeting.commands.common import (
    CliError,
    DatabaseTarget,
    UsageError,
    add_listen_flags,
    add_policy_flags,
    add_schema_actions,
    apply_migrations,
    check_keystone_config,
    check_listen,
    configure_logging,
    connect_engine,
    ensure_schema,
    first_line,
    read_revision,
    report_status,
    report_upgrade,
    resolve_database,
    settings_from_args,
    version,
)
from billeting.commands.pools import add_pool_flags
from billeting.config import Settings, ensure_default_data_dir
from billeting.serving import bind_address

LOG = logging.getLogger("billeting")


# --- parsing ----------------------------------------------------------------

def add_database_flags(parser: argparse.ArgumentParser) -> None:
    """--config-file, --db and --log-level: how a command finds Placement's database."""
    parser.add_argument("--config-file", metavar="PATH", default=None,
                        help="INI config file (flags and BILLETING_* variables take precedence)")
    parser.add_argument("--db", metavar="URL", default=None,
                        help="sqlite:///PATH, postgresql+psycopg://USER[:PW]@HOST/DB or "
                             "mysql+pymysql://USER[:PW]@HOST/DB (default: embedded SQLite)")
    parser.add_argument("--log-level", default=None, metavar="LEVEL",
                        help="DEBUG, INFO (default), WARNING or ERROR")


def register(commands) -> None:
    """``serve`` and ``db``."""
    serve = commands.add_parser("serve", help="serve the Placement API (foreground, until SIGTERM/SIGINT)")
    add_database_flags(serve)
    add_listen_flags(serve, port=8778)
    serve.add_argument("--header-timeout", type=float, metavar="SECONDS", default=None,
                       help="time a client gets to send its request line and headers (default 10)")
    serve.add_argument("--body-timeout", type=float, metavar="SECONDS", default=None,
                       help="time a client gets to send a request body (default 30)")
    serve.add_argument("--keepalive-timeout", type=float, metavar="SECONDS", default=None,
                       help="idle keep-alive connections are closed after this (default 75)")
    serve.add_argument("--graceful-timeout", type=float, metavar="SECONDS", default=None,
                       help="on SIGTERM/SIGINT, time given to requests in flight (default 10)")
    serve.add_argument("--max-body-size", type=int, metavar="BYTES", default=None,
                       help="larger request bodies get 413 (default 4194304)")
    add_policy_flags(serve, rules="Placement's rules")
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

    add_schema_actions(commands, "db", help="manage the database schema", dest="db_command", schema="schema",
                       add_flags=add_database_flags, upgrade=cmd_db_upgrade, status=cmd_db_status,
                       upgrade_help="apply the schema migrations and sync standard names")


# --- database ---------------------------------------------------------------

def prepare_embedded(target: DatabaseTarget) -> None:
    """Create the data directory of the embedded database (commands that
    write only: ``db status`` must not create anything)."""
    if not target.embedded:
        return
    try:
        ensure_default_data_dir()
    except OSError as exc:
        raise CliError(f"cannot create the data directory for {target.shown}: {exc.strerror}") from None


def upgrade_command(target: DatabaseTarget, settings: Settings, *, db_flag_given: bool) -> str:
    """The exact command that brings this database up to date (password hidden)."""
    if target.embedded:
        return "billeting db upgrade"
    if settings.config_file and not db_flag_given:
        return f"billeting db upgrade --config-file {settings.config_file}"
    return f"billeting db upgrade --db {target.shown}"


def sync_names(engine: Engine, target: DatabaseTarget) -> None:
    from billeting.placement.store.sync import sync_standard_names
    from billeting.common.db.tx import RetriesExhausted

    try:
        sync_standard_names(engine)
    except (DBAPIError, RetriesExhausted) as exc:
        raise CliError(f"syncing standard resource classes and traits into {target.shown} failed: "
                       f"{first_line(exc)}") from None


# --- commands ---------------------------------------------------------------

def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from billeting.placement.store import migrate

    settings = settings_from_args(args)
    configure_logging(settings.log_level)
    target = resolve_database(settings)
    prepare_embedded(target)
    engine = connect_engine(target)
    try:
        before, after = apply_migrations(engine, target, migrate)
        sync_names(engine, target)
    finally:
        engine.dispose()
    return report_upgrade("database", target.shown, before, after)


def cmd_db_status(args: argparse.Namespace) -> int:
    from billeting.placement.store import migrate

    settings = settings_from_args(args)
    target = resolve_database(settings)
    return report_status("database", target.shown, read_revision(target, migrate.current_revision),
                         migrate.head_revision(), upgrade_command(target, settings, db_flag_given=args.db is not None))


def check_app(settings: Settings) -> None:
    """Build the WSGI stack once in the master so a bad policy, keystone or
    CORS configuration stops start-up with a message, not a worker crash loop."""
    from billeting.placement.api.app import make_app
    from billeting.common.db.engine import make_engine

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
        raise CliError(f"invalid configuration: {first_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - any configuration failure, reported in one line
        raise CliError(f"invalid configuration: {type(exc).__name__}: {first_line(exc)}") from None
    finally:
        engine.dispose()


def cmd_serve(args: argparse.Namespace) -> int:
    from billeting.placement.store import migrate

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
        fix = upgrade_command(target, settings, db_flag_given=args.db is not None)
        ensure_schema(engine, target, migrate, label="database", may_upgrade=settings.auto_upgrade or target.embedded,
                      fix=f"'{fix}' (or start serve with --auto-upgrade)")
        # Once, in the master, before forking: workers find the names in place.
        sync_names(engine, target)
    finally:
        engine.dispose()

    from billeting.common.policy import describe as describe_policy

    LOG.info("policy: %s", describe_policy(legacy=settings.legacy_policy, enforce_scope=settings.enforce_scope))
    LOG.info("billeting %s: Placement API on http://%s/ (db %s, %d worker(s) x %d thread(s), auth %s%s)",
             version(), bind_address(settings.host, settings.port), target.shown, settings.workers,
             settings.threads, settings.auth,
             f", CORS for {', '.join(settings.cors_origins)}" if settings.cors_origins else "")
    from billeting.placement import serve

    serve.run(settings)
    return 0
