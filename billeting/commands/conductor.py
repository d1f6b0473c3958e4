"""``billeting conductor``: run a cell conductor.

    billeting conductor --cell C [--cell-db URL] [--transport-url URL] [--placement-url URL]
                        [--max-attempts N] [--sweep-interval S] [--metrics-port P] ...

Several conductors of one cell share its queue; each message goes to one.
"""
from __future__ import annotations

import argparse
import logging

from billeting.commands import common
from billeting.commands import cells
from billeting.commands.pools import add_pool_flags

LOG = logging.getLogger("billeting")

_FLAGS = {"max_attempts": "max_attempts", "service_down_time": "service_down_time_s",
          "report_interval": "report_interval_s", "sweep_interval": "sweep_interval_s",
          "cast_timeout": "cast_timeout_s", "reschedule_timeout": "reschedule_timeout_s",
          "delete_timeout": "delete_timeout_s", "build_timeout": "build_timeout_s",
          "recent_failure_window": "recent_failure_window_s", "recent_failure_hosts": "recent_failure_hosts"}


def register(commands) -> None:
    p = commands.add_parser("conductor", help="run a cell conductor (foreground, until SIGTERM/SIGINT)")
    cells.add_cell_flags(p)
    p.add_argument("--name", default=None, help="this conductor's service name (default host-pid)")
    p.add_argument("--max-attempts", type=int, default=None, help="builds tried per instance (default 3)")
    p.add_argument("--service-down-time", type=float, default=None, metavar="SECONDS",
                   help="a compute whose heartbeat is older is down (default 60)")
    p.add_argument("--report-interval", type=float, default=None, metavar="SECONDS")
    p.add_argument("--sweep-interval", type=float, default=None, metavar="SECONDS",
                   help="how often stuck builds and deletes are looked for (default 30)")
    p.add_argument("--cast-timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("--reschedule-timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("--delete-timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("--build-timeout", type=float, default=None, metavar="SECONDS",
                   help="fail builds on a live compute that take longer (default 0: never)")
    p.add_argument("--recent-failure-window", type=float, default=None, metavar="SECONDS",
                   help="alternates on hosts that failed a build this recently are tried last (default 60; 0: off)")
    p.add_argument("--recent-failure-hosts", type=int, default=None, metavar="N",
                   help="how many recently failed hosts the conductor remembers (default 1024)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics (reschedules, lost builds per cell) at "
                        "http://--metrics-host:PORT/metrics (default: not served)")
    p.add_argument("--metrics-host", default="127.0.0.1", help="the address of --metrics-port")
    add_pool_flags(p)
    p.set_defaults(func=cmd_conductor)


def conductor_settings(args: argparse.Namespace):
    from billeting.conductor.cell import ConductorSettings

    return cells.checked_settings(ConductorSettings, args, _FLAGS, "conductor")


def build_conductor(args: argparse.Namespace, wiring):
    from billeting.conductor.cell import CellConductor

    return CellConductor(wiring, conductor_settings(args), name=args.name)


def _serve_metrics(host: str, port: int, undo):
    """prometheus_client's own exporter in a thread: this process's counters
    (a standalone conductor has no other HTTP server)."""
    from prometheus_client import start_http_server

    try:
        server, _ = start_http_server(port, addr=host)
    except OSError as exc:
        undo()
        raise common.CliError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    LOG.info("metrics at http://%s:%d/metrics", host, port)
    return server


def cmd_conductor(args: argparse.Namespace) -> int:
    common.configure_logging(cells.log_level(args))
    conductor_settings(args)
    if args.metrics_port is not None and not 1 <= args.metrics_port <= 65535:
        raise common.UsageError(f"--metrics-port must be between 1 and 65535, not {args.metrics_port}")
    wiring = cells.wire(args)
    conductor = build_conductor(args, wiring)
    cells.start_on(wiring, conductor, args.cell)
    exporter = None
    if args.metrics_port is not None:
        exporter = _serve_metrics(args.metrics_host, args.metrics_port, lambda: (conductor.stop(), wiring.close()))

    def stop() -> None:
        if exporter is not None:
            exporter.shutdown()
        conductor.stop()
        wiring.close()

    return cells.run_until_signalled(stop)
