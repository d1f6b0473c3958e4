"""Service records (with their heartbeats) and compute node records.

A service is *up* while its heartbeat (``updated_at``) is younger than the
service-down time and no operator forced it down. A compute's record also
says whether it is *disabled*; the compute reports that to Placement as the
``COMPUTE_STATUS_DISABLED`` trait on its nodes. Compute node rows carry the
figures the resource tracker last saved and the consecutive failed builds
the build-failure weigher reads.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import Connection, Engine, delete, insert, select, update

from billeting import typeinfo
from billeting.cells import tables as t
from billeting.cells.instances import utcnow
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.catalog import json_facts, json_text

COMPUTE = "billeting-compute"
CONDUCTOR = "billeting-conductor"
DEFAULT_DOWN_TIME_S = 60.0


class ServiceRecord(msgspec.Struct, frozen=True, kw_only=True):
    host: str
    binary: str
    disabled: bool
    disabled_reason: str | None
    forced_down: bool
    report_count: int
    created_at: datetime
    updated_at: datetime
    id: int = 0    # the row id: the compute API's service id before microversion 2.53

    def is_up(self, down_time_s: float = DEFAULT_DOWN_TIME_S, now: datetime | None = None) -> bool:
        if self.forced_down:
            return False
        return (now or utcnow()) - self.updated_at <= timedelta(seconds=down_time_s)


def service_record(row) -> ServiceRecord:
    return ServiceRecord(host=row.host, binary=row.binary, disabled=bool(row.disabled),
                         disabled_reason=row.disabled_reason, forced_down=bool(row.forced_down),
                         report_count=row.report_count, created_at=row.created_at, updated_at=row.updated_at,
                         id=row.id)


def _get(conn: Connection, host: str, binary: str):
    return conn.execute(select(t.services).where(t.services.c.host == host,
                                                 t.services.c.binary == binary)).first()


def heartbeat(engine: Engine, host: str, binary: str) -> ServiceRecord:
    """Report the service alive (registering it on first use); returns its
    record, so the caller sees an operator's disable at the same time."""
    now = utcnow()

    def work(conn: Connection) -> ServiceRecord:
        c = t.services.c
        changed = conn.execute(update(t.services).where(c.host == host, c.binary == binary).values(
            updated_at=now, report_count=c.report_count + 1)).rowcount
        if not changed:
            conn.execute(insert(t.services).values(host=host, binary=binary, disabled=False, forced_down=False,
                                                   report_count=1, created_at=now, updated_at=now))
        return service_record(_get(conn, host, binary))

    return run_write(engine, work)


def get(engine: Engine, host: str, binary: str = COMPUTE) -> ServiceRecord | None:
    row = run_read(engine, lambda conn: _get(conn, host, binary))
    return service_record(row) if row is not None else None


def listing(engine: Engine, binary: str | None = None) -> list[ServiceRecord]:
    query = select(t.services).order_by(t.services.c.binary, t.services.c.host)
    if binary is not None:
        query = query.where(t.services.c.binary == binary)
    return [service_record(r) for r in run_read(engine, lambda conn: conn.execute(query).all())]


def is_up(engine: Engine, host: str, *, binary: str = COMPUTE, down_time_s: float = DEFAULT_DOWN_TIME_S) -> bool:
    record = get(engine, host, binary)
    return record is not None and record.is_up(down_time_s)


def set_disabled(engine: Engine, host: str, disabled: bool, *, reason: str | None = None,
                 binary: str = COMPUTE) -> bool:
    """False when no such service is registered."""
    c = t.services.c
    return run_write(engine, lambda conn: conn.execute(update(t.services).where(
        c.host == host, c.binary == binary).values(disabled=disabled,
                                                    disabled_reason=reason if disabled else None)).rowcount == 1)


def set_forced_down(engine: Engine, host: str, forced_down: bool, *, binary: str = COMPUTE) -> bool:
    c = t.services.c
    return run_write(engine, lambda conn: conn.execute(update(t.services).where(
        c.host == host, c.binary == binary).values(forced_down=forced_down)).rowcount == 1)


# --- compute nodes ------------------------------------------------------------------

class NodeCapabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a node's hypervisor is and can run, beyond its type (the
    scheduler's ComputeCapabilitiesFilter and ImagePropertiesFilter)."""

    hypervisor_version: int | None = None  # Nova's encoding: 6.2.0 is 6002000
    cpu_info: dict[str, Any] | None = None
    supported_instances: tuple[tuple[str, str, str], ...] = ()  # (arch, hypervisor type, vm mode)
    stats: dict[str, str] = {}


_to_capabilities = typeinfo.converter(NodeCapabilities)


class NodeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What the resource tracker saves for one node on each periodic run."""

    uuid: str
    nodename: str
    host: str
    hypervisor_type: str
    vcpus: int
    memory_mb: int
    local_gb: int
    vcpus_used: int
    memory_mb_used: int
    local_gb_used: int
    capabilities: NodeCapabilities | None = None


class ComputeNodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    nodename: str
    host: str
    hypervisor_type: str
    vcpus: int
    memory_mb: int
    local_gb: int
    vcpus_used: int
    memory_mb_used: int
    local_gb_used: int
    failed_builds: int
    updated_at: datetime
    id: int = 0    # the row id: the compute API's hypervisor id before microversion 2.53
    capabilities: NodeCapabilities = NodeCapabilities()


def node_capabilities(row) -> NodeCapabilities:
    """The capabilities a compute node row holds (columns left NULL: not reported)."""
    found = {"hypervisor_version": row.hypervisor_version, **json_facts(row)}
    return _to_capabilities({k: v for k, v in found.items() if v is not None})


def _node(row) -> ComputeNodeRecord:
    return ComputeNodeRecord(uuid=row.uuid, nodename=row.hypervisor_hostname, host=row.host,
                             hypervisor_type=row.hypervisor_type, vcpus=row.vcpus, memory_mb=row.memory_mb,
                             local_gb=row.local_gb, vcpus_used=row.vcpus_used, memory_mb_used=row.memory_mb_used,
                             local_gb_used=row.local_gb_used, failed_builds=row.failed_builds,
                             updated_at=row.updated_at, id=row.id, capabilities=node_capabilities(row))


def save_node(engine: Engine, usage: NodeUsage) -> None:
    """Insert or refresh a node's row (failed_builds is left as it is;
    capabilities only when the usage carries them)."""
    now = utcnow()
    figures = dict(hypervisor_hostname=usage.nodename, host=usage.host, hypervisor_type=usage.hypervisor_type,
                   vcpus=usage.vcpus, memory_mb=usage.memory_mb, local_gb=usage.local_gb,
                   vcpus_used=usage.vcpus_used, memory_mb_used=usage.memory_mb_used,
                   local_gb_used=usage.local_gb_used, updated_at=now)
    caps = usage.capabilities
    if caps is not None:
        figures.update(hypervisor_version=caps.hypervisor_version, cpu_info=json_text(caps.cpu_info),
                       supported_instances=json_text(list(caps.supported_instances)), stats=json_text(caps.stats))

    def work(conn: Connection) -> None:
        c = t.compute_nodes.c
        if not conn.execute(update(t.compute_nodes).where(c.uuid == usage.uuid).values(**figures)).rowcount:
            conn.execute(insert(t.compute_nodes).values(uuid=usage.uuid, failed_builds=0, created_at=now,
                                                        **figures))

    run_write(engine, work)


def record_build(engine: Engine, node_uuid: str, *, succeeded: bool) -> None:
    """A success resets the node's failed-build count; a failure bumps it."""
    c = t.compute_nodes.c
    value = 0 if succeeded else c.failed_builds + 1
    run_write(engine, lambda conn: conn.execute(
        update(t.compute_nodes).where(c.uuid == node_uuid).values(failed_builds=value)))


def nodes(engine: Engine, host: str | None = None) -> list[ComputeNodeRecord]:
    query = select(t.compute_nodes).order_by(t.compute_nodes.c.hypervisor_hostname)
    if host is not None:
        query = query.where(t.compute_nodes.c.host == host)
    return [_node(r) for r in run_read(engine, lambda conn: conn.execute(query).all())]


def node(engine: Engine, uuid: str) -> ComputeNodeRecord | None:
    row = run_read(engine, lambda conn: conn.execute(
        select(t.compute_nodes).where(t.compute_nodes.c.uuid == uuid)).first())
    return _node(row) if row is not None else None


def forget_node(engine: Engine, uuid: str) -> None:
    """A node its driver no longer reports (an Ironic node that left)."""
    run_write(engine, lambda conn: conn.execute(delete(t.compute_nodes).where(t.compute_nodes.c.uuid == uuid)))


def remove(engine: Engine, host: str, binary: str) -> bool:
    """Forget a service, and for a compute its nodes (an operator's
    decommission). False when it was not there."""

    def work(conn: Connection) -> bool:
        if binary == COMPUTE:
            conn.execute(delete(t.compute_nodes).where(t.compute_nodes.c.host == host))
        return conn.execute(delete(t.services).where(t.services.c.host == host,
                                                      t.services.c.binary == binary)).rowcount > 0

    return run_write(engine, work)

