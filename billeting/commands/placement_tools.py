"""``billeting placement export | import | audit``.

Export and import talk to the Placement API (``--url``), not to a database:
they then work with any Placement service, upstream's included (moving a
fleet from upstream to Billeting, or back, is the point), need no database
credentials, and every write goes through the service's own validation,
generation checks and policy. The audit can also read Billeting's database
(``--db``), because two of its checks look for records the API never shows.
"""
from __future__ import annotations

import argparse
import os
import sys

from billeting.placement.tools.errors import ToolError

# The commands import what they need when they run: ``billeting --help`` and
# ``billeting serve`` should not pay for requests, rich and msgspec.

EXIT_FINDINGS = 3
URL_ENV = "BILLETING_PLACEMENT_URL"
TOKEN_ENV = "OS_TOKEN"


def register(commands) -> None:
    """``placement`` and its actions (export, import, audit)."""
    from billeting.commands.placement import add_database_flags
    placement = commands.add_parser("placement", help="operator chores on a Placement service: export, import, audit")
    actions = placement.add_subparsers(dest="placement_command", metavar="ACTION", parser_class=type(placement))
    actions.required = True

    export = actions.add_parser("export", help="write a fleet (providers, trees, inventories, traits, aggregates, "
                                               "allocations) as JSON")
    _add_http(export, required=True)
    export.add_argument("--output", "-o", metavar="FILE", default="-", help="where to write (default: stdout)")
    export.set_defaults(func=cmd_export)

    importer = actions.add_parser("import", help="create a fleet from an export file")
    importer.add_argument("file", metavar="FILE", help="the export file ('-' for stdin)")
    _add_http(importer, required=True)
    importer.add_argument("--skip-existing", action="store_true",
                          help="leave providers and consumers that already exist alone and import the rest "
                               "(default: refuse to import anything when one exists)")
    importer.add_argument("--batch", type=int, default=100, metavar="N",
                          help="consumers per POST /allocations (default 100)")
    importer.set_defaults(func=cmd_import)

    audit = actions.add_parser("audit", help="find consumers without allocations, allocations on missing "
                                             "providers and usage over capacity; exit 3 when found",
                               description="Audit Billeting's database (--db, default: the embedded one; every "
                                           "check) or any Placement service through its API (--url; usage over "
                                           "capacity only). Exit status 3 when problems are found.")
    _add_http(audit, required=False)
    add_database_flags(audit)
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.add_argument("--recount-usage", action="store_true",
                       help="first set every inventory's kept usage from its allocations (the repair for "
                            "kept_usage_out_of_step; database only)")
    audit.set_defaults(func=cmd_audit)


def _add_http(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--url", default=None,
                        help=f"the Placement endpoint, e.g. http://127.0.0.1:8778 (or ${URL_ENV})"
                             + ("" if required else "; or give --db instead"))
    parser.add_argument("--token", default=None,
                        help=f"X-Auth-Token to send (or ${TOKEN_ENV}); with noauth2, 'admin'")
    parser.add_argument("--concurrency", type=int, default=8, metavar="N", help="requests in flight (default 8)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="show progress bars on stderr (default: when stderr is a terminal)")
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def _http(args: argparse.Namespace):
    from billeting.placement.tools.http import PlacementHttp

    url = args.url or os.environ.get(URL_ENV)
    if not url:
        raise ToolError(f"--url (or {URL_ENV}) is required")
    if not url.startswith(("http://", "https://")):
        raise ToolError(f"--url must start with http:// or https://, not {url!r}")
    token = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        raise ToolError(f"--token (or {TOKEN_ENV}) is required; with noauth2 use --token admin")
    if args.concurrency < 1:
        raise ToolError("--concurrency must be at least 1")
    return PlacementHttp(url, token)


# --- export / import --------------------------------------------------------------------

def cmd_export(args: argparse.Namespace) -> int:
    from billeting.placement.tools import fleet as fleets
    from billeting.placement.tools.export import export_fleet
    from billeting.placement.tools.progress import bars, show_progress

    if args.output == "-" and sys.stdout is None:  # started with stdout closed: fail before the work
        raise ToolError("standard output is closed: give --output FILE")
    http = _http(args)
    try:
        with bars(show_progress(args.progress)) as progress:
            fleet = export_fleet(http, progress, workers=args.concurrency)
    finally:
        http.close()
    data = fleets.encode(fleet)
    if args.output == "-":
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        except OSError as exc:  # e.g. a full disk behind a redirection
            raise ToolError(f"cannot write to standard output: {exc.strerror}") from None
    else:
        _write_whole(args.output, data)
    print(f"exported {len(fleet.providers)} providers and {len(fleet.consumers)} consumers from {http.url}"
          + ("" if args.output == "-" else f" to {args.output}"), file=sys.stderr)
    return 0


def _write_whole(target: str, data: bytes) -> None:
    """Write next to the target and rename: never a half-written file."""
    partial = f"{target}.partial"
    try:
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, target)
    except OSError as exc:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise ToolError(f"cannot write {target}: {exc.strerror}") from None


def _read_fleet(name: str):
    from billeting.placement.tools import fleet as fleets

    if name == "-" and sys.stdin is None:  # started with stdin closed
        raise ToolError("cannot read standard input: it is closed")
    try:
        if name == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(name, "rb") as source:
                data = source.read()
    except OSError as exc:
        raise ToolError(f"cannot read {name}: {exc.strerror}") from None
    try:
        return fleets.decode(data)
    except ValueError as exc:
        raise ToolError(f"{name}: {exc}") from None


def cmd_import(args: argparse.Namespace) -> int:
    from billeting.placement.tools.importer import import_fleet
    from billeting.placement.tools.progress import bars, show_progress

    fleet = _read_fleet(args.file)
    if args.batch < 1:
        raise ToolError("--batch must be at least 1")
    http = _http(args)
    try:
        with bars(show_progress(args.progress)) as progress:
            report = import_fleet(http, fleet, progress, skip_existing=args.skip_existing,
                                  workers=args.concurrency, batch=args.batch)
    finally:
        http.close()
    skipped = ""
    if report.skipped_providers or report.skipped_consumers:
        skipped = (f"; skipped {report.skipped_providers} providers and {report.skipped_consumers} consumers "
                   "that already existed")
    staged = (f"; {report.staged} inventories hold more usage than capacity, as in the export"
              if report.staged else "")
    print(f"imported {report.providers} providers, {report.consumers} consumers, {report.classes} custom "
          f"resource classes and {report.traits} custom traits into {http.url}{skipped}{staged}")
    return 0


# --- audit ------------------------------------------------------------------------------

def cmd_audit(args: argparse.Namespace) -> int:
    import msgspec

    from billeting.placement.tools import audit as audits
    from billeting.placement.tools.progress import bars, show_progress

    # --url: any Placement, capacity check only; otherwise Billeting's database
    # (--db, the config file, or the embedded default), every check.
    url = args.url or (os.environ.get(URL_ENV) if args.db is None and args.config_file is None else None)
    if url and (args.db is not None or args.config_file is not None):
        raise ToolError("give either --url or --db, not both")
    if url and args.recount_usage:
        raise ToolError("--recount-usage repairs Billeting's database: give --db (or the config file), not --url")
    with bars(show_progress(args.progress)) as progress:
        if url:
            args.url = url
            http = _http(args)
            try:
                report = audits.audit_http(http, progress, workers=args.concurrency)
            finally:
                http.close()
        else:
            report = _audit_database(args, progress)
    if args.json:
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(report), indent=1) + b"\n")
    else:
        _print_report(report)
    return EXIT_FINDINGS if report.findings else 0


def _audit_database(args: argparse.Namespace, progress):
    from billeting.commands.common import connect_engine, missing_sqlite_file, resolve_database, settings_from_args
    from billeting.placement.store import migrate
    from billeting.placement.tools import audit as audits

    target = resolve_database(settings_from_args(args))
    if missing_sqlite_file(target.url):
        raise ToolError(f"database {target.shown}: no such file")
    engine = connect_engine(target)
    try:
        current, head = migrate.current_revision(engine), migrate.head_revision()
        if current != head:
            raise ToolError(f"database {target.shown} is at revision {current or 'none'}, not {head}: "
                            "it is not a current Billeting database (run 'billeting db upgrade' if it is one)")
        if args.recount_usage:
            changed = audits.recount_usage(engine)
            print(f"recounted kept usage: {changed} inventory row(s) changed", file=sys.stderr)
        return audits.audit_database(engine, target.shown, progress)
    finally:
        engine.dispose()


def _print_report(report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console = Console(soft_wrap=True, width=200)  # a pipe or a file: do not fold uuids
    skipped = [c for c in report.checks if not c.ran]
    if report.findings:
        table = Table(title=f"{len(report.findings)} problem(s) in {report.source}")
        for column in ("Check", "Provider", "Class", "Consumer", "Detail"):
            table.add_column(column, overflow="fold")
        for f in report.findings:
            table.add_row(f.check, f.provider or "", f.resource_class or "", f.consumer or "", f.detail)
        console.print(table)
    else:
        console.print(f"no problems found in {report.source}")
    ran = ", ".join(c.name for c in report.checks if c.ran)
    console.print(f"checked: {ran}")
    for check in skipped:
        console.print(f"not checked: {check.name} ({check.reason})")
