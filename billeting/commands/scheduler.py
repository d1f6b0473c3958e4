"""``billeting scheduler …`` and ``billeting topology …``.

    billeting scheduler serve [--placement-url URL | --placement-db URL] [--port 8780] [--db URL]
                              [--workers N] [--transport-url URL] ...
    billeting scheduler db upgrade|status [--db URL]
    billeting topology define LEVEL NAME (--hosts H ... | --members M ...) [--url URL]
    billeting topology list [LEVEL] | show LEVEL NAME | remove LEVEL NAME

``topology`` talks to a running scheduler's HTTP API (``--url``, default
http://127.0.0.1:8780). Errors are one line on stderr (exit 1; 2 for usage).

This module only builds the parsers when ``billeting`` starts; each command
imports the scheduler when it runs, so ``billeting serve`` loads nothing of it.
"""
from __future__ import annotations

import argparse
import os

from typing import TYPE_CHECKING

import msgspec

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
    database_target,
    ensure_schema,
    first_line,
    given_flags,
    hide_password,
    read_revision,
    report_status,
    report_upgrade,
    resolve_database,
    version,
)
from billeting.commands.pools import add_pool_flags
from billeting.config import SettingsError

if TYPE_CHECKING:
    from billeting.scheduler.service.config import ServiceConfig

DEFAULT_URL = "http://127.0.0.1:8780"


def register(commands) -> None:
    """Add the ``scheduler`` and ``topology`` command groups to ``billeting``."""
    scheduler = commands.add_parser("scheduler", help="serve the scheduler; manage its API database")
    actions = scheduler.add_subparsers(dest="scheduler_command", metavar="ACTION", parser_class=type(scheduler))
    actions.required = True

    serve = actions.add_parser("serve", help="serve the scheduler's HTTP API (and RPC topic) until SIGTERM/SIGINT")
    _add_db(serve)
    add_listen_flags(serve, port=8780)
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--placement-url", default=None, metavar="URL",
                       help="Placement endpoint (default http://127.0.0.1:8778)")
    where.add_argument("--placement-db", default=None, metavar="URL",
                       help="run Placement in-process on this (migrated) database instead")
    serve.add_argument("--placement-token", default=None, metavar="TOKEN",
                       help="token for Placement under noauth2 (default admin)")
    serve.add_argument("--transport-url", default=None, metavar="URL",
                       help="also serve the scheduler RPC topic: amqp://USER:PW@HOST:5672/VHOST or memory:///SPACE")
    add_policy_flags(serve, rules="the scheduler API's rules")
    serve.add_argument("--auto-upgrade", action="store_true", default=None,
                       help="apply pending API-database migrations instead of refusing to start")
    add_pool_flags(serve)
    serve.set_defaults(func=cmd_serve)

    add_schema_actions(actions, "db", help="manage the scheduler's API database schema", dest="db_command",
                       schema="API-database", add_flags=_add_db, upgrade=cmd_db_upgrade, status=cmd_db_status)

    topology = commands.add_parser("topology", help="failure domains (racks, rows, rooms, cells) via the scheduler")
    t_actions = topology.add_subparsers(dest="topology_command", metavar="ACTION", parser_class=type(scheduler))
    t_actions.required = True
    define = t_actions.add_parser("define", help="create or redefine a domain from hosts or from members")
    _add_url(define)
    define.add_argument("level", help="rack, row, room, cell (the configured levels)")
    define.add_argument("name")
    source = define.add_mutually_exclusive_group(required=True)
    source.add_argument("--hosts", nargs="+", metavar="HOST", help="hosts (the narrowest level, or a cell)")
    source.add_argument("--members", nargs="+", metavar="DOMAIN", help="domains of the level below")
    define.set_defaults(func=cmd_topology_define)
    listing = t_actions.add_parser("list", help="list domains (of one level)")
    _add_url(listing)
    listing.add_argument("level", nargs="?")
    listing.set_defaults(func=cmd_topology_list)
    show = t_actions.add_parser("show", help="show one domain")
    _add_url(show)
    show.add_argument("level")
    show.add_argument("name")
    show.set_defaults(func=cmd_topology_show)
    remove = t_actions.add_parser("remove", help="remove a domain (its aggregate is emptied in Placement)")
    _add_url(remove)
    remove.add_argument("level")
    remove.add_argument("name")
    remove.set_defaults(func=cmd_topology_remove)


def _add_db(parser) -> None:
    parser.add_argument("--config-file", metavar="PATH", default=None,
                        help="INI config file (flags and BILLETING_SCHEDULER_* variables take precedence)")
    parser.add_argument("--db", metavar="URL", default=None,
                        help="the scheduler's API database (default: embedded SQLite)")
    parser.add_argument("--log-level", default=None, metavar="LEVEL", help="DEBUG, INFO (default), WARNING, ERROR")


def _add_url(parser) -> None:
    parser.add_argument("--url", default=None, help=f"scheduler API (default {DEFAULT_URL}; "
                                                    "BILLETING_SCHEDULER_URL)")
    parser.add_argument("--token", default=None, help="X-Auth-Token (default admin; BILLETING_SCHEDULER_TOKEN)")


def load_config(args: argparse.Namespace) -> ServiceConfig:
    from billeting.scheduler.service import config as config_mod

    try:
        return config_mod.load(given_flags(args, config_mod.ServiceConfig))
    except SettingsError as exc:  # a flag or config value the service cannot use: a usage error, as in serve
        raise UsageError(str(exc)) from None


# --- the API database ---------------------------------------------------------

def database(config: ServiceConfig, *, create: bool = True) -> DatabaseTarget:
    from billeting.apidb.engine import default_url

    return database_target(config.db or default_url(create=create), embedded=not config.db)


def cmd_db_upgrade(args) -> int:
    from billeting.apidb import migrate

    config = load_config(args)
    configure_logging(config.log_level)
    target = database(config)
    engine = connect_engine(target)
    try:
        before, after = apply_migrations(engine, target, migrate)
    finally:
        engine.dispose()
    return report_upgrade("API database", target.shown, before, after)


def cmd_db_status(args) -> int:
    from billeting.apidb import migrate

    config = load_config(args)
    target = database(config, create=False)  # a status creates nothing, not even the data directory
    fix = "billeting scheduler db upgrade" + ("" if target.embedded else f" --db {target.shown}")
    return report_status("API database", target.shown, read_revision(target, migrate.current_revision),
                         migrate.head_revision(), fix)


# --- serve --------------------------------------------------------------------

def _check_placement_db(url: str) -> None:
    from billeting.config import Settings
    from billeting.placement.store import migrate

    target = resolve_database(Settings(db=url))
    engine = connect_engine(target)
    try:
        current, head = migrate.current_revision(engine), migrate.head_revision()
    finally:
        engine.dispose()
    if current != head:
        raise CliError(f"Placement database {target.shown} is at revision {current or 'none'}, not {head}: "
                       f"run 'billeting db upgrade --db {target.shown}'")


def _check_bus(url: str) -> None:
    from billeting.messaging import Bus

    try:
        bus = Bus(url)
    except ValueError as exc:  # a URL no bus has: a bad setting value
        raise UsageError(str(exc)) from None
    try:
        with bus.connect() as conn:
            conn.ensure_connection(max_retries=1, timeout=5)
    except Exception as exc:  # noqa: BLE001 - any broker failure, in one line
        raise CliError(f"cannot reach the message bus {bus.url_shown}: {first_line(exc)}") from None
    finally:
        bus.close()


def _check_app(config: ServiceConfig) -> None:
    if config.auth == "keystone":
        check_keystone_config(config)  # same rule as billeting serve: a [keystone_authtoken] section
    if config.policy_file:
        try:
            with open(config.policy_file, encoding="utf-8"):
                pass
        except OSError as exc:
            raise CliError(f"cannot read policy file {config.policy_file}: {exc.strerror}") from None
    try:
        from billeting.scheduler.api.policy import authorizer

        authorizer(policy_file=config.policy_file, legacy=config.legacy_policy)
    except Exception as exc:  # noqa: BLE001 - a bad policy file, in one line
        raise CliError(f"invalid configuration: {type(exc).__name__}: {first_line(exc)}") from None


def cmd_serve(args) -> int:
    import logging

    from billeting.apidb import migrate
    from billeting.serving import bind_address
    from billeting.scheduler import serve

    config = load_config(args)
    configure_logging(config.log_level)
    target = database(config)
    config.db = target.url  # workers open exactly what the master checked
    _check_app(config)
    check_listen(config.host, config.port)
    if config.placement_db:
        _check_placement_db(config.placement_db)
    if config.transport_url:
        _check_bus(config.transport_url)
    engine = connect_engine(target)
    try:
        ensure_schema(engine, target, migrate, label="API database", may_upgrade=config.auto_upgrade or target.embedded,
                      fix=f"'billeting scheduler db upgrade --db {target.shown}' (or --auto-upgrade)")
    finally:
        engine.dispose()
    placement = f"in-process Placement on {hide_password(config.placement_db)}" if config.placement_db \
        else f"Placement at {config.placement_url}"
    logging.getLogger("billeting").info(
        "billeting %s: scheduler API on http://%s/ (API db %s, %s, %d worker(s), auth %s%s)", version(),
        bind_address(config.host, config.port), target.shown, placement, config.workers, config.auth,
        f", RPC on {hide_password(config.transport_url)}" if config.transport_url else "")
    serve.run(config)
    return 0


# --- topology (an HTTP client of the scheduler API) ---------------------------

class _Error(msgspec.Struct):
    detail: str = ""


class _Errors(msgspec.Struct):
    errors: list[_Error] = []


def _call(args, method: str, path: str, body: object | None = None) -> bytes:
    from billeting.placement_client.transport import HttpTransport, TransportError

    url = args.url or os.environ.get("BILLETING_SCHEDULER_URL") or DEFAULT_URL
    token = args.token or os.environ.get("BILLETING_SCHEDULER_TOKEN") or "admin"
    try:
        transport = HttpTransport(url, timeout=120.0)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    headers = {"Accept": "application/json", "X-Auth-Token": token}
    data = None
    if body is not None:
        data = msgspec.json.encode(body)
        headers["Content-Type"] = "application/json"
    try:
        resp = transport.request(method, path, data, headers)
    except TransportError as exc:
        raise CliError(f"cannot reach the scheduler at {url}: {exc} (is 'billeting scheduler serve' running?)") \
            from None
    finally:
        transport.close()
    if resp.status >= 400:
        try:
            errors = msgspec.json.decode(resp.body, type=_Errors).errors
        except msgspec.DecodeError:
            errors = []
        raise CliError(errors[0].detail if errors else f"the scheduler answered {resp.status}")
    return resp.body


def _domain_line(dom) -> str:
    parts = [f"{dom.level} {dom.name}"]
    if dom.parent:
        parts.append(f"in {dom.parent}")
    if dom.members:
        parts.append(f"members {', '.join(dom.members)}")
    parts.append(f"hosts {', '.join(dom.hosts) if dom.hosts else '(none)'}")
    return "  ".join(parts)


def _domain_path(args) -> str:
    """/topology/LEVEL/NAME, once NAME is one the scheduler accepts: an empty
    name or one with a '/' or a space would reach no route and come back as a
    bare 404 ("The resource could not be found")."""
    from billeting.scheduler.service.topology import NAME

    if not NAME.match(args.name):
        raise UsageError(f"invalid {args.level} name {args.name!r}: use 1 to 255 letters, digits, '-', '_', "
                         "'.' or ':', starting with a letter or digit")
    return f"/topology/{args.level}/{args.name}"


def cmd_topology_define(args) -> int:
    from billeting.scheduler.service.views import DomainView

    body = {"hosts": args.hosts} if args.hosts else {"members": args.members}
    dom = msgspec.json.decode(_call(args, "PUT", _domain_path(args), body), type=DomainView)
    print(f"defined {dom.level} {dom.name} (aggregate {dom.aggregate}): "
          f"{len(dom.hosts)} host{'s' if len(dom.hosts) != 1 else ''}: {', '.join(dom.hosts)}")
    return 0


def cmd_topology_list(args) -> int:
    from billeting.scheduler.service.views import TopologyView

    path = "/topology" + (f"/{args.level}" if args.level else "")
    found = msgspec.json.decode(_call(args, "GET", path), type=TopologyView)
    if not found.domains:
        print("no domains" + (f" at level {args.level}" if args.level else "")
              + f" (levels: {', '.join(found.levels)})")
    for dom in found.domains:
        print(_domain_line(dom))
    return 0


def cmd_topology_show(args) -> int:
    from billeting.scheduler.service.views import DomainView

    dom = msgspec.json.decode(_call(args, "GET", _domain_path(args)), type=DomainView)
    print(f"level:     {dom.level}\nname:      {dom.name}\naggregate: {dom.aggregate}\n"
          f"parent:    {dom.parent or '-'}\nmembers:   {', '.join(dom.members) or '-'}\n"
          f"hosts:     {', '.join(dom.hosts) or '-'}")
    return 0


def cmd_topology_remove(args) -> int:
    _call(args, "DELETE", _domain_path(args))
    print(f"removed {args.level} {args.name}")
    return 0
