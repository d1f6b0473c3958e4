"""``/os-services`` (list, enable/disable a compute), ``/os-hypervisors`` (nodes with usage)
and ``/os-availability-zone`` (zones with their services), read from every cell's database."""
from __future__ import annotations

import uuid as uuidlib

import falcon

from billeting.api.compute import availability_zones, paging, partial, schemas, views
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request, conflict, not_found
from billeting.apidb import cell_mappings
from billeting.cells import instances as inst
from billeting.cells import moves as cell_moves
from billeting.cells import services as svc
from billeting.cells.audit import MIGRATION_DONE
from billeting.cells.health import CellUnavailable
from billeting.cells.hosts import host_reports
from billeting.cells.rpc import ComputeAPI
from billeting.placement_client.client import PlacementError
from billeting.placement_client.trees import depth

_OUR_BINARY = {v: k for k, v in views.NOVA_BINARY.items()}
_NS = uuidlib.UUID("6c1e2a4e-0a3f-4b7a-9a55-5f4c2d8e1b10")


def service_uuid(cell: str, host: str, binary: str) -> str:
    return str(uuidlib.uuid5(_NS, f"{cell}/{host}/{binary}"))


def _all_services(deps: ComputeAPIDeps, down: set[str] | None = None) -> list[tuple[str, svc.ServiceRecord]]:
    """(cell, service) of every cell that answers; the names of those that
    do not are added to ``down`` (when given)."""
    found = []
    for cell, handle in sorted(deps.cells.cells().items()):
        try:
            records = deps.cells.read(cell, lambda engine=handle.engine: svc.listing(engine))
        except CellUnavailable:
            if down is not None:
                down.add(cell)
            continue
        found.extend((cell, record) for record in records)
    return found


def down_cell_services(deps: ComputeAPIDeps, down: set[str], zones: dict[str, str]) -> list[dict]:
    """The compute services of cells that do not answer (2.69+), as the API
    database knows them: each host mapped to such a cell, status UNKNOWN."""
    if not down:
        return []
    hosts = cell_mappings.host_cells(deps.api_engine)
    return [{"binary": views.NOVA_BINARY[svc.COMPUTE], "host": host, "zone": zones.get(host, availability_zones.
             DEFAULT_ZONE), "status": "UNKNOWN"} for host, cell in sorted(hosts.items()) if cell in down]


def service_view(cell: str, record: svc.ServiceRecord, ctx: RequestContext, down_s: float,
                 zones: dict[str, str]) -> dict:
    """Before 2.53 the id is the service's row id in its cell database, as in
    Nova: stable, but two cells can show the same one (2.53 brought uuids
    for that reason). ``zones`` is ``availability_zones.host_zones``."""
    binary = views.NOVA_BINARY.get(record.binary, record.binary)
    body = {"id": service_uuid(cell, record.host, record.binary) if ctx.version.at_least(53) else record.id,
            "binary": binary, "host": record.host,
            "zone": availability_zones.zone_of(record, zones),
            "status": "disabled" if record.disabled else "enabled",
            "state": "up" if record.is_up(down_s) else "down",
            "updated_at": views.iso_micro(record.updated_at), "disabled_reason": record.disabled_reason}
    if ctx.version.at_least(11):
        body["forced_down"] = record.forced_down
    return body


def cells_unavailable(down: set[str], what: str) -> NovaError:
    """The 503 of a change to a service that may be in a cell that does not
    answer (a 404 would say it does not exist, which nobody can tell)."""
    names = ", ".join(sorted(down))
    return NovaError(503, f"{what} may be in a cell that is unavailable ({names}): its database does not "
                          "answer. Please retry later.")


def _service(deps: ComputeAPIDeps, service_id: str, *, by_uuid: bool) -> tuple[str, svc.ServiceRecord]:
    """(cell, record) of the service ``service_id`` names: its uuid (2.53+),
    else its row id, which two cells may share (a 400 then); a 404 for none,
    a 503 when a cell that could hold it does not answer."""
    down: set[str] = set()
    found = _all_services(deps, down)
    if by_uuid:
        match = [(c, r) for c, r in found if service_uuid(c, r.host, r.binary) == service_id]
    else:
        match = [(c, r) for c, r in found if str(r.id) == service_id]
        if len(match) > 1:
            raise bad_request(f"Service id {service_id} is in more than one cell; use microversion 2.53 or "
                              "later (uuids).")
        if down:  # (a down cell may hold the same row id: which one is meant cannot be told)
            raise cells_unavailable(down, f"Service {service_id}")
    if not match:
        if down:
            raise cells_unavailable(down, f"Service {service_id}")
        raise not_found(f"Service {service_id} could not be found.")
    return match[0]


def _delete_tree(client, root: str) -> None:
    """A node's provider tree out of Placement, children before parents."""
    parent_of = {p.uuid: p.parent_provider_uuid for p in client.list_providers(in_tree=root)}
    for uuid in sorted(parent_of, key=lambda u: depth(u, parent_of), reverse=True):
        client.delete_provider(uuid)


class Services:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-services:list")
        zones = availability_zones.host_zones(self.deps, best_effort=True)
        down: set[str] = set()
        bodies = [service_view(cell, rec, ctx, self.deps.service_down_time_s, zones)
                  for cell, rec in _all_services(self.deps, down)]
        if ctx.version.at_least(partial.MICROVERSION):
            bodies.extend(down_cell_services(self.deps, down, zones))
        if req.params.get("host"):
            bodies = [b for b in bodies if b["host"] == req.params["host"]]
        if req.params.get("binary"):
            bodies = [b for b in bodies if b["binary"] == req.params["binary"]]
        resp.media = {"services": bodies}

    def _change(self, cell: str, record: svc.ServiceRecord, *, disabled: bool | None, reason: str | None,
                forced_down: bool | None) -> svc.ServiceRecord:
        engine = self.deps.cells.engine_of(cell)

        def write() -> None:
            if disabled is not None:
                svc.set_disabled(engine, record.host, disabled, reason=reason, binary=record.binary)
            if forced_down is not None:
                svc.set_forced_down(engine, record.host, forced_down, binary=record.binary)
        try:  # (the cell may have stopped answering since the service was read)
            self.deps.cells.read(cell, write, deadline=False)
        except CellUnavailable:
            raise cells_unavailable({cell}, f"Service {record.host}/{record.binary}") from None
        if record.binary == svc.COMPUTE:
            bus = self.deps.cells.bus_of(cell)
            if bus is not None:
                # Push it now: the compute reports COMPUTE_STATUS_DISABLED to Placement.
                ComputeAPI(bus).refresh_service(record.host)
        self.deps.on_service_change()
        return svc.get(engine, record.host, record.binary)  # type: ignore[return-value]

    def on_put_one(self, req, resp, service_id: str) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-services:update")
        doc = schemas.body(req)
        if service_id in ("enable", "disable", "disable-log-reason", "force-down"):
            self._legacy(req, resp, ctx, service_id, doc)
            return
        if not ctx.version.at_least(53):
            raise not_found("The resource could not be found.")
        schemas.check(doc, schemas.SERVICE_UPDATE)
        if not doc:
            raise bad_request("At least one of status or forced_down must be specified.")
        cell, record = _service(self.deps, service_id, by_uuid=True)
        if doc.get("disabled_reason") and doc.get("status") != "disabled":
            raise bad_request("Specifying 'disabled_reason' with status 'enabled' is invalid.")
        if record.binary != svc.COMPUTE:
            raise bad_request("Updating a nova-compute service is the only supported update.")
        disabled = None if "status" not in doc else doc["status"] == "disabled"
        record = self._change(cell, record, disabled=disabled, reason=doc.get("disabled_reason"),
                              forced_down=doc.get("forced_down"))
        resp.media = {"service": service_view(cell, record, ctx, self.deps.service_down_time_s,
                                              availability_zones.host_zones(self.deps, best_effort=True))}

    def on_delete_one(self, req, resp, service_id: str) -> None:
        """Decommission a service, as Nova does: a compute only when it runs no
        servers and takes part in no move; its nodes leave Placement (so
        nothing is scheduled there), the cell database and the host mappings.
        A compute still running registers again, nodes included, at its next
        heartbeat (stop it first, as in Nova)."""
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-services:delete")
        cell, record = _service(self.deps, service_id, by_uuid=ctx.version.at_least(53))
        engine = self.deps.cells.engine_of(cell)
        unavailable = f"Service {record.host}/{record.binary}"
        if record.binary == svc.COMPUTE:
            def read():
                return ([r for r in inst.on_host(engine, record.host) if r.vm_state != inst.VmState.DELETED],
                        [m for m in cell_moves.involving(engine, record.host) if m.status not in MIGRATION_DONE],
                        svc.nodes(engine, record.host))
            try:  # (the cell may have stopped answering since the service was read)
                hosting, moving, nodes = self.deps.cells.read(cell, read)
            except CellUnavailable:
                raise cells_unavailable({cell}, unavailable) from None
            if hosting:
                raise conflict("Unable to delete compute service that is hosting instances. Migrate or delete "
                               "the instances first.")
            if moving:
                raise conflict("Unable to delete compute service that has in-progress migrations. Complete the "
                               "migrations or delete the instances first.")
            client = self.deps.scheduler.client
            for node in nodes:
                try:
                    _delete_tree(client, node.uuid)
                except PlacementError as exc:
                    if exc.status == 409:
                        raise conflict(f"Unable to delete compute service: the resource provider {node.uuid} of "
                                       f"node {node.nodename} still holds allocations in Placement.") from None
                    raise
            cell_mappings.unmap_host(self.deps.api_engine, record.host)
        try:  # (a 503 here is retried: what was already removed is not looked for again)
            self.deps.cells.read(cell, lambda: svc.remove(engine, record.host, record.binary), deadline=False)
        except CellUnavailable:
            raise cells_unavailable({cell}, unavailable) from None
        self.deps.on_service_change()
        resp.status = falcon.HTTP_204

    def _legacy(self, req, resp, ctx: RequestContext, action: str, doc) -> None:
        if ctx.version.at_least(53):
            raise not_found("The resource could not be found.")
        schemas.check(doc, schemas.SERVICE_LEGACY)
        binary = _OUR_BINARY.get(doc["binary"], doc["binary"])
        down: set[str] = set()
        match = [(c, r) for c, r in _all_services(self.deps, down) if r.host == doc["host"] and r.binary == binary]
        if not match:
            if down:
                raise cells_unavailable(down, f"Host '{doc['host']}'")
            raise not_found(f"Host '{doc['host']}' is not mapped to any cell")
        cell, record = match[0]
        body = {"host": record.host, "binary": doc["binary"]}
        if action == "force-down":
            if "forced_down" not in doc:
                raise bad_request("forced_down is required")
            self._change(cell, record, disabled=None, reason=None, forced_down=doc["forced_down"])
            body["forced_down"] = doc["forced_down"]
        else:
            reason = doc.get("disabled_reason") if action == "disable-log-reason" else None
            if action == "disable-log-reason" and not reason:
                raise bad_request("Missing disabled reason field")
            self._change(cell, record, disabled=action != "enable", reason=reason, forced_down=None)
            body["status"] = "enabled" if action == "enable" else "disabled"
            if reason:
                body["disabled_reason"] = reason
        resp.media = {"service": body}


# oslo's strict reading of a boolean query parameter, as Nova's schemas take them.
_BOOLEANS = {**dict.fromkeys(("1", "t", "true", "on", "y", "yes"), True),
             **dict.fromkeys(("0", "f", "false", "off", "n", "no"), False)}


class Hypervisors:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def _nodes(self, with_servers: bool = False):
        """(cell, node, its service, its host report, its servers or None) of every node."""
        found = []
        for cell, handle in sorted(self.deps.cells.cells().items()):
            def read(engine=handle.engine, cell=cell):
                return (host_reports(engine, cell=cell, down_time_s=self.deps.service_down_time_s),
                        {r.host: r for r in svc.listing(engine, svc.COMPUTE)},
                        inst.by_node(engine) if with_servers else None, svc.nodes(engine))
            try:
                reports, services, servers, nodes = self.deps.cells.read(cell, read)
            except CellUnavailable:  # (its nodes are left out until it answers)
                continue
            for node in nodes:
                found.append((cell, node, services.get(node.host), reports.get(node.nodename),
                              servers.get(node.nodename, []) if servers is not None else None))
        return found

    @staticmethod
    def _with_servers(req, ctx: RequestContext) -> bool:
        """``with_servers`` (2.53+; ignored before, as Nova does)."""
        if not ctx.version.at_least(53) or "with_servers" not in req.params:
            return False
        value = str(req.params["with_servers"]).lower()
        if value not in _BOOLEANS:
            raise bad_request(f"Invalid input for query parameters with_servers. Value: {req.params['with_servers']}."
                              " 'with_servers' is not a boolean")
        return _BOOLEANS[value]

    def _view(self, cell: str, node, service, report, servers, ctx: RequestContext, detail: bool) -> dict:
        # Before 2.53: row ids of the cell databases (stable; see service_view).
        new_ids = ctx.version.at_least(53)
        body = {"id": node.uuid if new_ids else node.id, "hypervisor_hostname": node.nodename,
                "state": "up" if report is not None and report.up else "down",
                "status": "disabled" if service is not None and service.disabled else "enabled"}
        # Asked for: the node's servers (from 2.75 an empty list too, before left out when empty).
        if servers is not None and (servers or ctx.version.at_least(75)):
            body["servers"] = [{"name": name, "uuid": uuid} for name, uuid in servers]
        if not detail:
            return body
        body.update({"host_ip": "127.0.0.1", "hypervisor_type": node.hypervisor_type,
                     "hypervisor_version": node.capabilities.hypervisor_version or 1,
                     "service": {"host": node.host,
                                 "id": service_uuid(cell, node.host, svc.COMPUTE) if new_ids else
                                 (service.id if service else None),
                                 "disabled_reason": service.disabled_reason if service else None}})
        if not ctx.version.at_least(88):
            body.update({"vcpus": node.vcpus, "memory_mb": node.memory_mb, "local_gb": node.local_gb,
                         "vcpus_used": node.vcpus_used, "memory_mb_used": node.memory_mb_used,
                         "local_gb_used": node.local_gb_used, "free_ram_mb": node.memory_mb - node.memory_mb_used,
                         "free_disk_gb": node.local_gb - node.local_gb_used,
                         "current_workload": report.num_io_ops if report and report.num_io_ops else 0,
                         "running_vms": report.num_instances if report and report.num_instances else 0,
                         "disk_available_least": node.local_gb - node.local_gb_used, "cpu_info": "{}"})
        else:
            body["uptime"] = None
        return body

    def _list(self, req, resp, detail: bool) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-hypervisors:list-detail" if detail else "os_compute_api:os-hypervisors:list")
        bodies = [self._view(*row, ctx, detail) for row in self._nodes(self._with_servers(req, ctx))]
        pattern = req.params.get("hypervisor_hostname_pattern")
        if pattern:
            bodies = [b for b in bodies if pattern in b["hypervisor_hostname"]]
        links = []
        if ctx.version.at_least(33):  # paging (the marker: an id, a uuid from 2.53 on)
            bodies, links = paging.page(bodies, req, "os-hypervisors/detail" if detail else "os-hypervisors",
                                        lambda b: str(b["id"]))
        resp.media = {"hypervisors": bodies, **({"hypervisors_links": links} if links else {})}

    def on_get(self, req, resp) -> None:
        self._list(req, resp, False)

    def on_get_detail(self, req, resp) -> None:
        self._list(req, resp, True)

    def on_get_one(self, req, resp, hypervisor_id: str) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-hypervisors:show")
        if ctx.version.at_least(53):
            rows = [row for row in self._nodes(self._with_servers(req, ctx)) if row[1].uuid == hypervisor_id]
        else:
            rows = [row for row in self._nodes() if str(row[1].id) == hypervisor_id]
            if len(rows) > 1:
                raise bad_request(f"Hypervisor id {hypervisor_id} is in more than one cell; use microversion "
                                  "2.53 or later (uuids).")
        if not rows:
            raise not_found(f"Hypervisor with ID {hypervisor_id} could not be found.")
        resp.media = {"hypervisor": self._view(*rows[0], ctx, True)}

    def on_get_statistics(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-hypervisors:statistics")
        nodes = [row[1] for row in self._nodes()]
        total = {"count": len(nodes)}
        for key in ("vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used"):
            total[key] = sum(getattr(n, key) for n in nodes)
        total.update({"free_ram_mb": total["memory_mb"] - total["memory_mb_used"],
                      "free_disk_gb": total["local_gb"] - total["local_gb_used"], "current_workload": 0,
                      "running_vms": 0, "disk_available_least": total["local_gb"] - total["local_gb_used"]})
        resp.media = {"hypervisor_statistics": total}


__all__ = ["Services", "Hypervisors", "falcon"]


class AvailabilityZones:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def _services(self) -> list[tuple[str, svc.ServiceRecord]]:
        """(zone, service) of every service in every cell, by zone then host."""
        zones = availability_zones.host_zones(self.deps)
        found = [(availability_zones.zone_of(record, zones), record) for _cell, record in _all_services(self.deps)]
        return sorted(found, key=lambda zr: (zr[0], zr[1].host, zr[1].binary))

    @staticmethod
    def _states(services: list[tuple[str, svc.ServiceRecord]]) -> dict[str, bool]:
        """Zone → available (some service in it is enabled), in name order."""
        states: dict[str, bool] = {}
        for zone, record in services:
            states[zone] = states.get(zone, False) or not record.disabled
        return states

    def on_get(self, req, resp) -> None:
        req.context.nova.authorize("os_compute_api:os-availability-zone:list")
        states = self._states(self._services())
        states.pop(availability_zones.INTERNAL_ZONE, None)  # (services' own zone: not a place to boot)
        resp.media = {"availabilityZoneInfo": [
            {"zoneName": zone, "zoneState": {"available": ok}, "hosts": None} for zone, ok in states.items()]}

    def on_get_detail(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-availability-zone:detail")
        services = self._services()
        hosts: dict[str, dict[str, dict]] = {}
        for zone, record in services:
            if record.disabled:
                continue  # an available zone lists its enabled services only
            binary = views.NOVA_BINARY.get(record.binary, record.binary)
            hosts.setdefault(zone, {}).setdefault(record.host, {})[binary] = {
                "available": record.is_up(self.deps.service_down_time_s), "active": True,
                "updated_at": views.iso_micro(record.updated_at)}
        resp.media = {"availabilityZoneInfo": [
            {"zoneName": zone, "zoneState": {"available": ok}, "hosts": hosts.get(zone) if ok else None}
            for zone, ok in self._states(services).items()]}
