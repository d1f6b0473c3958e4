"""``billeting super-conductor``: the super conductor as a process of its own.

    billeting super-conductor [--config-file PATH] [--db API_DB_URL] [--transport-url API_BUS_URL]
                              [--placement-url URL] [--build-attempts N] [--threads N]

It consumes the ``super_conductor`` topic on the API bus (several processes
may: each cast goes to one of them), asks the schedulers for hosts over RPC
(topic ``scheduler`` on the same bus) and hands each instance to its cell
(the cells come from the API database's cell mappings).

Settings, highest first: flags, ``BILLETING_*`` environment variables, the
config file (``[api_database] connection``, ``[DEFAULT] transport_url``,
``[placement] endpoint``, ``[conductor] build_attempts``).
"""
from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from billeting.commands import common
from billeting.commands.pools import add_pool_flags

LOG = logging.getLogger("billeting")

# The scheduler may take long on a big request; Nova's long_rpc_timeout is 1800 s.
DEFAULT_SCHEDULER_TIMEOUT_S = 300.0


def register(commands) -> None:
    p = commands.add_parser("super-conductor",
                            help="run a super conductor on the API bus (foreground, until SIGTERM/SIGINT)")
    p.add_argument("--config-file", metavar="PATH", default=None,
                   help="INI file ([api_database] connection, [DEFAULT] transport_url, [placement] endpoint, "
                        "[conductor] build_attempts); default $BILLETING_CONFIG_FILE")
    p.add_argument("--db", metavar="URL", default=None, help="the API database (default $BILLETING_API_DB)")
    p.add_argument("--transport-url", metavar="URL", default=None,
                   help="the API bus, amqp://USER:PW@HOST:PORT/VHOST (default $BILLETING_TRANSPORT_URL)")
    p.add_argument("--placement-url", metavar="URL", default=None,
                   help="Placement (default $BILLETING_PLACEMENT_URL, else http://127.0.0.1:8778)")
    p.add_argument("--placement-token", metavar="TOKEN", default=None)
    add_build_attempts_flag(p)
    p.add_argument("--threads", type=int, default=4, help="requests handled at once (default 4)")
    p.add_argument("--scheduler-timeout", type=float, default=DEFAULT_SCHEDULER_TIMEOUT_S, metavar="SECONDS",
                   help=f"how long a scheduler call may take (default {DEFAULT_SCHEDULER_TIMEOUT_S:g})")
    p.add_argument("--log-level", default=None, metavar="LEVEL")
    add_pool_flags(p)
    p.set_defaults(func=cmd_super_conductor)


def add_build_attempts_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--build-attempts", type=int, default=None, metavar="N",
                   help="hosts tried per instance: N-1 alternates (default [conductor] build_attempts of the "
                        "config file, else 3)")


@dataclass(frozen=True)
class SuperConductorConfig:
    api_db: str
    transport_url: str
    placement_url: str
    placement_token: str
    build_attempts: int
    log_level: str


def _file_option(path: str | None, section: str, option: str) -> str | None:
    if not path:
        return None
    from billeting.config import SettingsError, read_config_file

    try:
        parser = read_config_file(path)
    except SettingsError as exc:
        raise common.CliError(str(exc)) from None
    if section == "DEFAULT":
        return parser.defaults().get(option)
    return parser.get(section, option) if parser.has_option(section, option) else None


def build_attempts(args: argparse.Namespace, config_file: str | None = None) -> int:
    """``--build-attempts``, else ``[conductor] build_attempts`` of the config file, else 3."""
    from billeting.conductor import super_conductor as sc

    config_file = config_file or getattr(args, "config_file", None) or os.environ.get("BILLETING_CONFIG_FILE")
    value: object = args.build_attempts
    where = "--build-attempts"
    if value is None:
        raw = _file_option(config_file, "conductor", "build_attempts")
        where = f"{config_file}: [conductor] build_attempts"
        try:
            value = int(raw) if raw is not None else sc.DEFAULT_BUILD_ATTEMPTS
        except ValueError:
            raise common.CliError(f"{where}: not a whole number: {raw!r}") from None
    try:
        sc.ConductorSettings(build_attempts=int(value)).check()  # type: ignore[arg-type]
    except ValueError as exc:
        raise common.CliError(f"{where}: {exc}") from None
    return int(value)  # type: ignore[arg-type]


def load_config(args: argparse.Namespace) -> SuperConductorConfig:
    path = args.config_file or os.environ.get("BILLETING_CONFIG_FILE")

    def pick(flag: str | None, env: str, section: str, option: str, default: str | None = None) -> str | None:
        return flag or os.environ.get(env) or _file_option(path, section, option) or default

    api_db = pick(args.db, "BILLETING_API_DB", "api_database", "connection")
    transport = pick(args.transport_url, "BILLETING_TRANSPORT_URL", "DEFAULT", "transport_url")
    if not api_db:
        raise common.CliError("the super conductor needs the API database: --db URL (or $BILLETING_API_DB, "
                                  "or [api_database] connection)")
    if not transport or not transport.startswith(("amqp://", "pyamqp://")):
        raise common.CliError("the super conductor needs the API bus: --transport-url amqp://USER:PW@HOST:PORT/VHOST "
                                  "(or $BILLETING_TRANSPORT_URL, or [DEFAULT] transport_url)")
    level = (args.log_level or os.environ.get("BILLETING_LOG_LEVEL") or "INFO").upper()
    placement_url = pick(args.placement_url, "BILLETING_PLACEMENT_URL", "placement", "endpoint",
                         "http://127.0.0.1:8778") or ""
    common.check_placement_url(placement_url)
    return SuperConductorConfig(
        api_db=api_db, transport_url=transport,
        placement_url=placement_url,
        placement_token=pick(args.placement_token, "BILLETING_PLACEMENT_TOKEN", "placement", "token",
                             "admin") or "admin",
        build_attempts=build_attempts(args, path), log_level=level)


class RemoteScheduler:
    """``super_conductor.Selector`` over RPC; ``client`` lets the conductor
    give a claim back when the user deleted the server meanwhile."""

    def __init__(self, rpc, placement, *, timeout: float) -> None:
        self.rpc = rpc
        self.client = placement
        self.timeout = timeout

    def select(self, request, alternates: int = 0, *, group: str | None = None):
        from billeting.messaging.bus import BusUnavailable, CallTimeout
        from billeting.scheduler.errors import SchedulerError

        try:
            return self.rpc.select_destinations(request, alternates, group=group, timeout=self.timeout)
        except (CallTimeout, BusUnavailable) as exc:
            # No answer: whatever a slow scheduler claimed is found by the audit.
            raise SchedulerError(f"the scheduler did not answer: {exc}") from None


def cmd_super_conductor(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import DBAPIError

    from billeting.apidb import migrate
    from billeting.apidb.cell_directory import CellCatalog
    from billeting.conductor import super_conductor as sc
    from billeting.apidb.engine import make_engine
    from billeting.commands.cells import run_until_signalled
    from billeting.messaging import Bus, BusUnavailable
    from billeting.placement_client import PlacementUnavailable, http_client
    from billeting.scheduler.rpc import SchedulerClient

    config = load_config(args)
    common.configure_logging(config.log_level)
    if args.threads < 1:
        raise common.CliError("--threads must be at least 1")
    engine = make_engine(config.api_db)
    try:
        current, head = migrate.current_revision(engine), migrate.head_revision()
    except DBAPIError as exc:
        engine.dispose()
        raise common.CliError(f"cannot use the API database {common.hide_password(config.api_db)}: "
                                  f"{common.first_line(exc)}") from None
    if current != head:
        engine.dispose()
        raise common.CliError(f"the API database is at revision {current or 'none'}, not {head}: run "
                                  f"'billeting scheduler db upgrade --db URL' first")
    cells = CellCatalog.open(engine)
    if cells.cell0 is None:
        LOG.warning("no cell0 mapping: unschedulable instances will stay in BUILD "
                    "(billeting compute-api cell add cell0 --cell-db URL)")
    placement = http_client(config.placement_url, token=config.placement_token)
    try:
        placement.version  # noqa: B018 - negotiates, proving Placement answers
    except PlacementUnavailable as exc:
        cells.close()
        engine.dispose()
        raise common.CliError(f"cannot reach Placement at {config.placement_url}: {exc.detail}") from None
    bus = Bus(config.transport_url)
    scheduler = RemoteScheduler(SchedulerClient(bus), placement, timeout=args.scheduler_timeout)
    conductor = sc.SuperConductor(api_engine=engine, cells=cells, scheduler=scheduler,
                                  settings=sc.ConductorSettings(build_attempts=config.build_attempts))
    try:
        sc.serve(bus, conductor, threads=args.threads)
    except BusUnavailable as exc:
        bus.close()
        cells.close()
        engine.dispose()
        raise common.CliError(f"the API bus: {exc}") from None
    LOG.info("super conductor serving %s on %s (cells: %s; build_attempts %d)", sc.TOPIC, bus.url_shown,
             ", ".join(sorted(cells.cells())) or "none", config.build_attempts)

    def stop() -> None:
        bus.close()
        cells.close()
        placement.close()
        engine.dispose()

    return run_until_signalled(stop)
