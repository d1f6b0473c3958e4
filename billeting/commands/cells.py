"""Command-line pieces for a cell's processes, and the cell commands:

    billeting cell-db upgrade|status [--cell C] [--cell-db URL]
    billeting audit --cell C=URL [--cell C=URL ...] [--placement-url URL] [--dry-run] [--remove-unknown]

A process of a cell is configured with its cell's database (``--cell-db``
or ``BILLETING_CELL_DB``), its cell's bus (``--transport-url`` or
``BILLETING_TRANSPORT_URL``) and Placement (``--placement-url`` or
``BILLETING_PLACEMENT_URL``): there is no flag for the API database or the
API bus, so a cell process cannot be given one.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable

from billeting.commands import common
from billeting.config import LOG_LEVELS, default_data_dir, ensure_default_data_dir

LOG = logging.getLogger("billeting")

DEFAULT_PLACEMENT_URL = "http://127.0.0.1:8778"


def default_cell_db(cell: str, *, create: bool = True) -> str:
    """The embedded SQLite file of a cell in the per-user data directory
    (created unless ``create`` is false: read-only commands)."""
    if create:
        ensure_default_data_dir()
    return f"sqlite:///{default_data_dir() / f'cell-{cell}.sqlite'}"


def default_transport(cell: str) -> str:
    return f"amqp://guest:guest@127.0.0.1:5672/{cell}"


def add_cell_flags(parser: argparse.ArgumentParser, *, bus: bool = True) -> None:
    parser.add_argument("--cell", default="cell1", help="the cell's name (default cell1)")
    parser.add_argument("--cell-db", metavar="URL", default=None,
                        help="the cell's database (default: $BILLETING_CELL_DB, else an embedded SQLite "
                             "file per cell)")
    if bus:
        parser.add_argument("--transport-url", metavar="URL", default=None,
                            help="the cell's bus: amqp://USER:PW@HOST:PORT/VHOST (default: "
                                 "$BILLETING_TRANSPORT_URL, else amqp://guest:guest@127.0.0.1:5672/<cell>)")
        parser.add_argument("--placement-url", metavar="URL", default=None,
                            help=f"Placement endpoint (default: $BILLETING_PLACEMENT_URL, else "
                                 f"{DEFAULT_PLACEMENT_URL})")
        parser.add_argument("--placement-token", metavar="TOKEN", default=None,
                            help="token sent to Placement (default: $BILLETING_PLACEMENT_TOKEN, else admin)")
    parser.add_argument("--auto-upgrade", action="store_true",
                        help="apply pending cell schema migrations instead of refusing to start")
    parser.add_argument("--log-level", default=None, metavar="LEVEL", help="DEBUG, INFO (default), WARNING or ERROR")


def log_level(args: argparse.Namespace) -> str:
    level = (args.log_level or os.environ.get("BILLETING_LOG_LEVEL") or "INFO").upper()
    if level not in LOG_LEVELS:
        raise common.CliError(f"log level must be DEBUG, INFO, WARNING or ERROR, not {level!r}")
    return level


def cell_db_url(args: argparse.Namespace, *, create: bool = True) -> tuple[str, bool]:
    """(normalized URL, whether it is the embedded default)."""
    from sqlalchemy.exc import ArgumentError

    from billeting.common.db.engine import UnsupportedDatabase, normalize_url

    raw = args.cell_db or os.environ.get("BILLETING_CELL_DB")
    embedded = not raw
    raw = raw or default_cell_db(args.cell, create=create)
    try:
        return normalize_url(raw), embedded
    except UnsupportedDatabase as exc:
        raise common.CliError(str(exc)) from None
    except (ArgumentError, ValueError):
        raise common.CliError(f"invalid cell database URL {shown(raw)!r}") from None


def shown(url: str) -> str:
    return common.hide_password(url)


def transport_url(args: argparse.Namespace) -> str:
    url = args.transport_url or os.environ.get("BILLETING_TRANSPORT_URL") or default_transport(args.cell)
    if not url.startswith(("amqp://", "pyamqp://", "memory://")):
        raise common.CliError(f"invalid transport URL {shown(url)!r}: use amqp://USER:PW@HOST:PORT/VHOST")
    if url.startswith("memory://"):
        raise common.CliError("a memory:// bus only reaches this process; give the cell's amqp:// URL")
    return url


def placement_url(args: argparse.Namespace) -> str:
    """The Placement endpoint; one that is no http(s) URL is a usage error."""
    url = args.placement_url or os.environ.get("BILLETING_PLACEMENT_URL") or DEFAULT_PLACEMENT_URL
    common.check_placement_url(url)
    return url


def placement_client(args: argparse.Namespace):
    """A client of the Placement ``args`` name, which has answered once."""
    from billeting.placement_client import PlacementError, PlacementUnavailable, http_client

    url = placement_url(args)
    token = args.placement_token or os.environ.get("BILLETING_PLACEMENT_TOKEN") or "admin"
    client = http_client(url, token=token)
    try:
        client.version  # noqa: B018 - negotiates, proving Placement answers
    except PlacementUnavailable as exc:
        client.close()
        raise common.CliError(f"cannot reach Placement at {url}: {exc.detail}") from None
    except PlacementError as exc:  # an answer, but not a Placement we can use
        client.close()
        raise common.CliError(f"cannot use Placement at {url}: {exc}") from None
    return client


def open_cell_engine(args: argparse.Namespace):
    """The cell database, connected and at the current schema."""
    from sqlalchemy.exc import DBAPIError

    from billeting.cells.wiring import CellSchemaError, open_cell_database

    url, embedded = cell_db_url(args)
    try:
        return open_cell_database(url, upgrade=args.auto_upgrade or embedded, pool_size=4)
    except CellSchemaError as exc:
        fix = "billeting cell-db upgrade" + ("" if embedded else f" --cell-db {shown(url)}")
        raise common.CliError(f"{shown(url)}: {exc}; run '{fix}' (or start with --auto-upgrade)") from None
    except DBAPIError as exc:
        raise common.CliError(f"cannot use cell database {shown(url)}: {common.first_line(exc)}") from None


def wire(args: argparse.Namespace):
    """Everything a process of the cell named by ``args`` gets."""
    from billeting.cells.wiring import CellConfig, wire_cell
    from billeting.messaging import BusUnavailable

    bus_url = transport_url(args)
    placement_url(args)  # a malformed URL is refused before the database is touched
    engine = open_cell_engine(args)
    try:
        placement = placement_client(args)
    except BaseException:
        engine.dispose()
        raise
    cell = CellConfig(name=args.cell, database_url=engine.url.render_as_string(hide_password=False),
                      transport_url=bus_url)
    wiring = wire_cell(cell, placement, engine=engine)
    try:
        # Before the caller registers anything in the cell or Placement: a
        # bus refused later would leave a service and its providers behind.
        wiring.require_bus().check()
    except BusUnavailable as exc:
        wiring.close()
        placement.close()
        raise common.CliError(f"cell {args.cell}'s bus: {exc}") from None
    return wiring


def checked_settings(make, args: argparse.Namespace, flags: dict[str, str], what: str):
    """``make(**...)`` from the flags given (flag -> field), checked: a bad
    value is one line naming ``what``."""
    settings = make(**{field: getattr(args, flag) for flag, field in flags.items()
                       if getattr(args, flag, None) is not None})
    try:
        settings.check()
    except ValueError as exc:
        raise common.CliError(f"invalid {what} setting: {exc}") from None
    return settings


def start_on(wiring, component, cell: str) -> None:
    """Start ``component`` (computes, a conductor) on its cell's ``wiring``; a
    bus or a Placement that does not answer stops both and is one line."""
    from billeting.messaging import BusUnavailable
    from billeting.placement_client import PlacementError

    try:
        component.start()
    except (BusUnavailable, PlacementError) as exc:
        component.stop()
        wiring.close()
        where = f"cell {cell}'s bus" if isinstance(exc, BusUnavailable) else "Placement"
        raise common.CliError(f"{where}: {exc}") from None


def run_until_signalled(stop: Callable[[], None]) -> int:
    """Block until SIGTERM or SIGINT, then ``stop()``; exit status 0."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    LOG.info("stopping")
    stop()
    return 0


# --- billeting cell-db ---------------------------------------------------------------

def register(commands) -> None:
    common.add_schema_actions(commands, "cell-db", help="manage a cell database's schema", dest="cell_db_command",
                              schema="cell schema", add_flags=lambda p: add_cell_flags(p, bus=False),
                              upgrade=cmd_cell_db_upgrade, status=cmd_cell_db_status)

    audit = commands.add_parser("audit", help="find (and remove) allocations no instance or move explains")
    audit.add_argument("--cell", dest="cells", metavar="NAME=URL", action="append", default=[],
                       help="a cell's name and database URL; give every cell, cell0 included")
    audit.add_argument("--placement-url", metavar="URL", default=None,
                       help=f"Placement endpoint (default: $BILLETING_PLACEMENT_URL, else {DEFAULT_PLACEMENT_URL})")
    audit.add_argument("--placement-token", metavar="TOKEN", default=None, help="token sent to Placement")
    audit.add_argument("--dry-run", action="store_true", help="report only; remove nothing")
    audit.add_argument("--remove-unknown", action="store_true",
                       help="also remove allocations of consumers no cell knows (only when no build is "
                            "in flight: a build the API level claimed but has not recorded looks the same)")
    audit.add_argument("--log-level", default=None, metavar="LEVEL")
    audit.set_defaults(func=cmd_audit)


def _engine_for(url: str):
    return common.connect_engine(common.DatabaseTarget(url=url, shown=shown(url), embedded=False),
                                 what="cell database")


def cmd_cell_db_upgrade(args: argparse.Namespace) -> int:
    from billeting.cells import migrate

    common.configure_logging(log_level(args))
    url, embedded = cell_db_url(args)
    target = common.DatabaseTarget(url=url, shown=shown(url), embedded=embedded)
    engine = _engine_for(url)
    try:
        before, after = common.apply_migrations(engine, target, migrate)
    finally:
        engine.dispose()
    return common.report_upgrade("cell database", target.shown, before, after)


def cmd_cell_db_status(args: argparse.Namespace) -> int:
    from billeting.cells import migrate

    url, embedded = cell_db_url(args, create=False)  # a status creates nothing, not even the data directory
    target = common.DatabaseTarget(url=url, shown=shown(url), embedded=embedded)
    return common.report_status("cell database", target.shown, common.read_revision(target, migrate.current_revision),
                                migrate.head_revision(), f"billeting cell-db upgrade --cell-db {target.shown}")


def cmd_audit(args: argparse.Namespace) -> int:
    from billeting.cells import audit, migrate, services

    common.configure_logging(log_level(args))
    if not args.cells:
        raise common.CliError("name every cell with --cell NAME=DATABASE_URL (cell0 included)")
    engines = {}
    try:
        for item in args.cells:
            name, sep, url = item.partition("=")
            if not sep or not name or not url:
                raise common.CliError(f"--cell wants NAME=DATABASE_URL, not {item!r}")
            if name in engines:
                raise common.CliError(f"cell {name} is named twice")
            url = cell_db_url(argparse.Namespace(cell_db=url, cell=name))[0]
            if common.missing_sqlite_file(url):
                raise common.CliError(f"cell {name}'s database {shown(url)}: no such file")
            engine = _engine_for(url)
            engines[name] = engine
            if migrate.current_revision(engine) != migrate.head_revision():
                raise common.CliError(f"cell {name}'s database {shown(url)} is not at the current schema; "
                                          f"run 'billeting cell-db upgrade --cell-db {shown(url)}'")
        client = placement_client(argparse.Namespace(placement_url=args.placement_url,
                                                     placement_token=args.placement_token))
        providers: list[str] = []
        for engine in engines.values():
            for node in services.nodes(engine):
                providers.extend(p.uuid for p in client.list_providers(in_tree=node.uuid))
        report = audit.audit(client, sorted(set(providers)), engines, remove=not args.dry_run,
                             remove_unknown=args.remove_unknown)
    finally:
        for engine in engines.values():
            engine.dispose()
    for f in report.findings:
        what = "removed" if f.removed else ("kept" if f.verdict is audit.Verdict.UNKNOWN else "found")
        held = "; ".join(f"{rp}: " + ", ".join(f"{rc}={n}" for rc, n in sorted(res.items()))
                         for rp, res in sorted(f.holdings.items()))
        print(f"{what:8} {f.consumer_uuid}  {f.verdict.value:18} {f.cell or '-':8} {held}")
    orphans = sum(1 for f in report.findings if f.verdict.orphan)
    unknown = sum(1 for f in report.findings if f.verdict is audit.Verdict.UNKNOWN)
    print(f"audited {report.providers} provider(s) and {report.consumers} consumer(s): {orphans} orphaned, "
          f"{unknown} unknown, {len(report.removed)} removed" + (" (dry run)" if args.dry_run else ""))
    return 0
