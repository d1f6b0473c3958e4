"""``--db-pool-size``/``--db-max-overflow``: one setting for every database
engine a long-running command opens (its own, the API database's, each cell's).

Also read from the ``[database]`` section (``max_pool_size``, ``max_overflow``)
of the command's ``--config-file``; the flags win.
"""
from __future__ import annotations

import argparse
import configparser


def add_pool_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db-pool-size", type=int, metavar="N", default=None,
                        help="connections each database engine of this process keeps open (default 10; "
                             "or [database] max_pool_size)")
    parser.add_argument("--db-max-overflow", type=int, metavar="N", default=None,
                        help="extra connections an engine may open under load (default 20; "
                             "or [database] max_overflow)")


def pool_limits(args: argparse.Namespace) -> tuple[int | None, int | None]:
    size = getattr(args, "db_pool_size", None)
    overflow = getattr(args, "db_max_overflow", None)
    path = getattr(args, "config_file", None)
    if path and (size is None or overflow is None) and hasattr(args, "db_pool_size"):
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(path)
        if size is None and parser.has_option("database", "max_pool_size"):
            size = parser.getint("database", "max_pool_size")
        if overflow is None and parser.has_option("database", "max_overflow"):
            overflow = parser.getint("database", "max_overflow")
    return size, overflow


def apply_pool_flags(args: argparse.Namespace) -> None:
    from billeting.common.db.engine import configure_pools

    size, overflow = pool_limits(args)
    if size is not None or overflow is not None:
        configure_pools(size, overflow)
