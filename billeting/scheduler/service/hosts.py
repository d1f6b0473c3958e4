"""Host reports (``PUT /hosts/{name}``): what a compute tells the scheduler
besides what Placement knows. See ``billeting.apidb.host_reports``."""
from __future__ import annotations

from billeting.apidb import host_reports as store
from billeting.apidb.aggregates import utcnow
from billeting.apidb.host_reports import StoredReport
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.catalog import CAPABILITY_JSON, HostReport, json_text
from billeting.scheduler.errors import InvalidRequest, NotFound
from billeting.scheduler.service.views import HostView, iso

MAX_NAME = 255
# The JSON fields' text must fit a TEXT column on every backend (64 KiB on MySQL).
MAX_JSON = 16384


def view(service, report: StoredReport, *, with_record: bool = False) -> HostView:
    f = report.fields
    record = None
    if with_record:
        found = [r for r in service.catalog.by_name(report.name) if r.name.lower() == report.name.lower()]
        record = found[0] if found else None
    return HostView(name=report.name, service_host=f.service_host, cell=f.cell_uuid, enabled=f.enabled,
                    up=report.up(utcnow(), service.down_after_s), last_heartbeat=iso(report.last_heartbeat),
                    failed_builds=f.failed_builds, num_instances=f.num_instances, num_io_ops=f.num_io_ops,
                    hypervisor_type=f.hypervisor_type, hypervisor_version=f.hypervisor_version,
                    cpu_info=f.cpu_info, supported_instances=f.supported_instances, stats=f.stats,
                    updated_at=iso(report.updated_at), record=record)


def put(service, name: str, fields: HostReport, *, heartbeat: bool) -> tuple[HostView, bool]:
    if not name or len(name) > MAX_NAME:
        raise InvalidRequest(f"a host name has 1 to {MAX_NAME} characters")
    for counter in ("failed_builds", "num_instances", "num_io_ops"):
        value = getattr(fields, counter)
        if value is not None and value < 0:
            raise InvalidRequest(f"{counter} must not be negative")
    for field in CAPABILITY_JSON:
        text = json_text(getattr(fields, field))
        if text is not None and len(text.encode()) > MAX_JSON:
            raise InvalidRequest(f"{field} takes at most {MAX_JSON} bytes as JSON")
    report, created = run_write(service.engine, lambda conn: store.put(conn, name, fields, heartbeat=heartbeat))
    service.catalog.invalidate()
    return view(service, report), created


def get(service, name: str) -> HostView:
    report = run_read(service.engine, lambda conn: store.get(conn, name))
    if report is None:
        raise NotFound(f"no report for host {name}")
    return view(service, report, with_record=True)


def list_hosts(service) -> list[HostView]:
    return [view(service, r) for r in run_read(service.engine, store.list_reports)]


def delete(service, name: str) -> None:
    if not run_write(service.engine, lambda conn: store.delete_report(conn, name)):
        raise NotFound(f"no report for host {name}")
    service.catalog.invalidate()
