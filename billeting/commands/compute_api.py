"""``billeting compute-api serve``: the compute API with its super conductor and scheduler.

    billeting compute-api serve [--port 8774] [--db URL] [--placement-url URL | --placement-db URL]
                                [--transport-url URL] [--conductor local|remote] [--build-attempts 3]
                                [--config-file PATH] [--workers N] [--policy-file PATH]

The cells come from the API database's cell mappings (``billeting compute-api
cell add``). With ``--transport-url`` (the API bus) creates are cast to the
super conductor topic; ``--conductor local`` (the default) also serves that
topic in this process, ``--conductor remote`` leaves it to separate
``billeting super-conductor`` processes. Without a transport URL each worker
schedules in a thread of its own.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import os

from billeting.commands import common
from billeting.commands import cells
from billeting.commands.cells import DEFAULT_PLACEMENT_URL
from billeting.commands.pools import add_pool_flags
from billeting.commands import super_conductor
from billeting.config import LOG_LEVELS

LOG = logging.getLogger("billeting")


def register(commands) -> None:
    p = commands.add_parser("compute-api", help="the compute API (Nova's shapes) and its cell mappings")
    sub = p.add_subparsers(dest="compute_api_command", required=True)
    serve = sub.add_parser("serve", help="serve the compute API (foreground, until SIGTERM/SIGINT)")
    _common(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8774)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--threads", type=int, default=8)
    serve.add_argument("--placement-url", default=None,
                       help="Placement endpoint (default $BILLETING_PLACEMENT_URL, else http://127.0.0.1:8778)")
    serve.add_argument("--placement-token", default="admin")
    serve.add_argument("--placement-db", default=None, help="use Placement in-process on this database instead")
    serve.add_argument("--transport-url", default=None, help="the API bus (default: none, in-process)")
    serve.add_argument("--conductor", choices=("local", "remote"), default="local",
                       help="local: this process serves the super conductor topic; remote: separate "
                            "'billeting super-conductor' processes do (needs --transport-url)")
    serve.add_argument("--config-file", metavar="PATH", default=None,
                       help="INI file for [conductor] build_attempts and, with --auth keystone, "
                            "[keystone_authtoken] (default $BILLETING_CONFIG_FILE)")
    serve.add_argument("--auth", choices=("noauth2", "keystone"), default="noauth2",
                       help="noauth2 (default): test-only tokens; keystone: keystonemiddleware validates "
                            "tokens with the Keystone named in the config file's [keystone_authtoken]")
    serve.add_argument("--policy-file", metavar="PATH", default=None,
                       help="oslo.policy YAML/JSON file overriding the compute API's rules by name "
                            "(os_compute_api:servers:delete, ...)")
    super_conductor.add_build_attempts_flag(serve)
    add_pool_flags(serve)
    serve.set_defaults(func=cmd_serve)
    cell = sub.add_parser("cell", help="map a cell (cell0: no transport URL)")
    cell_sub = cell.add_subparsers(dest="cell_command", required=True)
    add = cell_sub.add_parser("add", help="create or update a cell mapping")
    _common(add)
    add.add_argument("name")
    add.add_argument("--cell-db", required=True, help="the cell's database URL")
    add.add_argument("--transport-url", default=None, help="the cell's bus (omit for cell0)")
    add.set_defaults(func=cmd_cell_add)
    image = sub.add_parser("image", help="add an image to the small image catalog")
    image_sub = image.add_subparsers(dest="image_command", required=True)
    put = image_sub.add_parser("add")
    _common(put)
    put.add_argument("id")
    put.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    put.add_argument("--disk-format", default=None, metavar="FORMAT",
                     help="qcow2, raw, iso, ... (what a host must boot with [scheduler] "
                          "query_placement_for_image_type_support; default none)")
    put.set_defaults(func=cmd_image_add)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="the API database (default $BILLETING_API_DB, else embedded SQLite)")
    p.add_argument("--log-level", default="INFO")


def _api_engine(args):
    """The API database, migrated; a bad URL or a database that cannot be
    used is one line (the workers call this too, after the master did)."""
    from alembic.util import CommandError
    from sqlalchemy.exc import DBAPIError

    from billeting.apidb import migrate
    from billeting.apidb.engine import default_url, make_engine

    raw = args.db or os.environ.get("BILLETING_API_DB") or default_url()
    engine = make_engine(common.database_target(raw, embedded=False, what="API database").url)
    try:
        migrate.upgrade(engine)
    except (DBAPIError, CommandError) as exc:
        engine.dispose()
        raise common.CliError(f"cannot use the API database {common.hide_password(raw)}: {common.first_line(exc)}") from None
    return engine


def _name(what: str, value: str) -> str:
    if not value.strip() or value != value.strip():
        raise common.UsageError(f"{what} {value!r}: must not be empty or begin or end with whitespace")
    return value


def _write(engine, work, what: str):
    """Run a write on the API database; a refusal (too long a value, the
    database gone) is one line."""
    from sqlalchemy.exc import DBAPIError

    try:
        return work()
    except DBAPIError as exc:
        raise common.CliError(f"cannot {what}: {common.first_line(exc)}") from None
    finally:
        engine.dispose()


def cmd_cell_add(args) -> int:
    from urllib.parse import urlsplit

    from billeting.apidb import cell_mappings

    _name("cell name", args.name)
    # What Bus() accepts: a mapping it cannot open would stop every scheduler
    # and compute API that reads the mappings.
    if args.transport_url is not None and urlsplit(args.transport_url).scheme not in ("amqp", "pyamqp", "memory"):
        raise common.UsageError(f"--transport-url {common.hide_password(args.transport_url)!r}: expected "
                                    "amqp://USER:PW@HOST:PORT/VHOST")
    engine = _api_engine(args)
    try:
        cells.open_cell_engine(argparse.Namespace(cell_db=args.cell_db, cell=args.name,
                                                         auto_upgrade=True)).dispose()
    except BaseException:
        engine.dispose()
        raise
    found = _write(engine, lambda: cell_mappings.ensure_cell(
        engine, name=args.name, database_connection=args.cell_db, transport_url=args.transport_url),
        f"map cell {args.name}")
    print(f"cell {found.name} ({found.uuid}) mapped")
    return 0


def cmd_image_add(args) -> int:
    from billeting.apidb import images

    _name("image id", args.id)
    props = {}
    for item in args.property:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise common.UsageError(f"--property {item}: expected KEY=VALUE")
        props[key] = value
    disk_format = _name("disk format", args.disk_format) if args.disk_format is not None else None
    engine = _api_engine(args)
    _write(engine, lambda: images.put(engine, args.id, name=args.id, properties=props, disk_format=disk_format),
           f"add image {args.id}")
    print(f"image {args.id} added")
    return 0


def load_app(args):
    """Runs in each worker after the fork."""
    from billeting.api.compute.plane import ControlPlane
    from billeting.apidb.cell_directory import CellCatalog
    from billeting.messaging import Bus
    from billeting.scheduler.service.config import ServiceConfig
    from billeting.scheduler.serve import placement_client

    engine = _api_engine(args)
    config = ServiceConfig(placement_url=args.placement_url or os.environ.get("BILLETING_PLACEMENT_URL")
                           or DEFAULT_PLACEMENT_URL, placement_token=args.placement_token,
                           placement_db=args.placement_db or "")
    plane = ControlPlane(api_engine=engine, cells=CellCatalog.open(engine), placement=placement_client(config),
                         api_bus=Bus(args.transport_url) if args.transport_url else None,
                         build_attempts=args.build_attempts, serve_conductor=args.conductor == "local",
                         policy_file=args.policy_file)
    if args.auth == "keystone":
        from billeting.common.keystone_auth import COMPUTE_OPEN, keystone_protected

        return keystone_protected(plane.app(), _config_file(args), COMPUTE_OPEN)
    return plane.app()


def _config_file(args) -> str | None:
    return args.config_file or os.environ.get("BILLETING_CONFIG_FILE")


def _check_policy_file(path: str | None) -> None:
    """A policy file that cannot be read or parsed is one line, before any worker starts."""
    from billeting.api.compute import policy
    from billeting.common.policy import PolicyFileError

    try:
        policy.enforcer(policy_file=path)
    except PolicyFileError as exc:
        raise common.CliError(str(exc)) from None


def cmd_serve(args) -> int:
    from billeting.api.compute.errors import render_server_error  # Nova's format
    from billeting.serving import ServeOptions, metrics, run

    args.log_level = args.log_level.upper()
    if args.log_level not in LOG_LEVELS:
        raise common.UsageError(f"--log-level {args.log_level}: expected DEBUG, INFO, WARNING or ERROR")
    if not 1 <= args.port <= 65535:
        raise common.UsageError(f"--port must be between 1 and 65535, not {args.port}")
    if args.auth == "keystone":  # a missing file or section is a usage error, before any worker starts
        common.check_keystone_config(argparse.Namespace(config_file=_config_file(args)))
    if args.conductor == "remote" and not args.transport_url:
        raise common.UsageError("--conductor remote casts to super conductors on the API bus: give --transport-url")
    try:
        options = ServeOptions(host=args.host, port=args.port, workers=args.workers, threads=args.threads,
                               log_level=args.log_level, process_name="billeting-compute-api",
                               on_ready=lambda url: LOG.info("ready: %s", url), render_error=render_server_error)
    except ValueError as exc:  # workers or threads below 1
        raise common.UsageError(str(exc)) from None
    if not args.placement_db:
        args.placement_url = args.placement_url or os.environ.get("BILLETING_PLACEMENT_URL") or DEFAULT_PLACEMENT_URL
        common.check_placement_url(args.placement_url)
    common.configure_logging(args.log_level)
    args.build_attempts = super_conductor.build_attempts(args)
    _check_policy_file(args.policy_file)
    _api_engine(args).dispose()
    if not args.placement_db:
        # As the conductors and computes do: no Placement, no start (not a 503 on every request).
        cells.placement_client(argparse.Namespace(placement_url=args.placement_url,
                                                         placement_token=args.placement_token)).close()
    # Workers share one directory of metric files (GET /metrics adds them up).
    run(dataclasses.replace(options, **metrics.master_hooks(LOG)), functools.partial(load_app, args))
    return 0
