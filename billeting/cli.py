"""The ``billeting`` command: every sub-command, listed by group.

    billeting serve [--host H] [--port P] [--db URL] [--workers N] ...
    billeting db upgrade [--db URL]
    billeting db status [--db URL]
    billeting placement export|import|audit ...
    billeting scheduler serve|db …, billeting topology …
    billeting compute --host H --cell C --driver fake ...
    billeting conductor --cell C ... / billeting super-conductor ...
    billeting cell-db upgrade|status --cell-db URL, billeting audit --cell C=URL ...
    billeting compute-api serve|cell add|image add ...
    billeting up [--cells N --computes N]
    billeting simulate SCENARIO.toml ...
    billeting --version

Each group lives in ``billeting/commands/<group>.py`` with the same
``register(commands)``; this module only lists them, in the order
``billeting --help`` shows them.

Every failure the operator can fix ends in one line on stderr and a
non-zero exit status, never a traceback: 2 for usage errors (a bad flag,
setting value, config file or database URL: anything wrong before the
network or the database is touched), 1 for the rest (unreachable or
outdated database, unreadable or invalid policy file, port in use).
Read-only commands (the ``status`` commands, the audits) create no files.
"""
from __future__ import annotations

import importlib
import sys

from billeting.commands.common import CliError, Parser, version
from billeting.commands.pools import apply_pool_flags
from billeting.placement.tools.errors import ToolError

# Modules of billeting.commands, each adding its sub-commands.
GROUPS = ("placement", "placement_tools", "scheduler", "compute", "conductor", "super_conductor", "cells",
          "compute_api", "up", "simulate")


def build_parser() -> Parser:
    parser = Parser(prog="billeting", description="Billeting: a Placement-compatible control plane.")
    parser.add_argument("--version", action="version", version=f"billeting {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    for group in GROUPS:
        importlib.import_module(f"billeting.commands.{group}").register(commands)
    return parser


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
    # ``python -m billeting.cli``: the commands raise ``common.CliError``,
    # the class this module catches, so running it as ``__main__`` is enough.
    sys.exit(main())
