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
from billeting.cells.services import COMPUTE, DEFAULT_DOWN_TIME_S, node_capabilities, service_record
from billeting.common.db.tx import run_read
from billeting.scheduler.catalog import HostReport


def host_reports(engine: Engine, *, cell: str, down_time_s: float = DEFAULT_DOWN_TIME_S,
                 now: datetime | None = None) -> dict[str, HostReport]:
    """Node name → report: its service host, cell, enabled/up, consecutive
    failed builds, instances on it and how many of those are busy, and what
    its hypervisor is and can run (as the compute last saved it)."""
    now = now or utcnow()

    def work(conn):
        c = t.compute_nodes.c
        nodes = conn.execute(select(c.hypervisor_hostname, c.host, c.failed_builds, c.hypervisor_type,
                                    c.hypervisor_version, c.cpu_info, c.supported_instances, c.stats)).all()
        services = {row.host: service_record(row) for row in conn.execute(
            select(t.services).where(t.services.c.binary == COMPUTE)).all()}
        return nodes, services, counts_by_node(conn)

    nodes, services, counts = run_read(engine, work)
    reports = {}
    for node in nodes:
        name, host = node.hypervisor_hostname, node.host
        service = services.get(host)
        instances, busy = counts.get(name, (0, 0))
        caps = node_capabilities(node)
        reports[name] = HostReport(
            service_host=host, cell_uuid=cell,
            enabled=service is not None and not service.disabled,
            up=service is not None and service.is_up(down_time_s, now),
            failed_builds=node.failed_builds, num_instances=instances, num_io_ops=busy,
            hypervisor_type=node.hypervisor_type, hypervisor_version=caps.hypervisor_version,
            cpu_info=caps.cpu_info, supported_instances=caps.supported_instances, stats=caps.stats)
    return reports


def merged(reports: Iterable[Mapping[str, HostReport]]) -> dict[str, HostReport]:
    """Several cells' reports in one mapping (node names are unique per deployment)."""
    found: dict[str, HostReport] = {}
    for part in reports:
        found.update(part)
    return found
