"""What a scheduler reads about a cell's hosts (schedulers may read cell
databases; a cell never reads the API level).

``host_reports`` answers with the scheduler's own ``HostReport`` type,
keyed by node name as ``PlacementHostCatalog`` looks reports up, so a
control plane plugs a cell in with::

    catalog = PlacementHostCatalog(client, directory,
                                   reports=lambda: merged(host_reports(e, cell=name) for name, e in cells))
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import Engine, select

from billeting.cells import tables as t
from billeting.cells.instances import counts_by_node, utcnow
from billeting.cells.services import COMPUTE, DEFAULT_DOWN_TIME_S, service_record
from billeting.placement.store.tx import run_read
from billeting.scheduler.catalog import HostReport


def host_reports(engine: Engine, *, cell: str, down_time_s: float = DEFAULT_DOWN_TIME_S,
                 now: datetime | None = None) -> dict[str, HostReport]:
    """Node name → report: its service host, cell, enabled/up, consecutive
    failed builds, instances on it and how many of those are busy."""
    now = now or utcnow()

    def work(conn):
        nodes = conn.execute(select(t.compute_nodes.c.hypervisor_hostname, t.compute_nodes.c.host,
                                    t.compute_nodes.c.failed_builds)).all()
        services = {row.host: service_record(row) for row in conn.execute(
            select(t.services).where(t.services.c.binary == COMPUTE)).all()}
        return nodes, services, counts_by_node(conn)

    nodes, services, counts = run_read(engine, work)
    reports = {}
    for name, host, failed in nodes:
        service = services.get(host)
        instances, busy = counts.get(name, (0, 0))
        reports[name] = HostReport(
            service_host=host, cell_uuid=cell,
            enabled=service is not None and not service.disabled,
            up=service is not None and service.is_up(down_time_s, now),
            failed_builds=failed, num_instances=instances, num_io_ops=busy)
    return reports


def merged(reports: Iterable[Mapping[str, HostReport]]) -> dict[str, HostReport]:
    """Several cells' reports in one mapping (node names are unique per deployment)."""
    found: dict[str, HostReport] = {}
    for part in reports:
        found.update(part)
    return found
