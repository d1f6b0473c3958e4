"""``/servers``: create (202, handed to the super conductor), show, list across cells, delete."""
from __future__ import annotations

import logging
import uuid as uuidlib

import falcon
import orjson
from sqlalchemy import Connection

from billeting.api.compute import (availability_zones, paging, partial, schemas, server_listing, server_locks, server_sort,
                                   views)
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request, forbidden
from billeting.api.compute.flavors import visible as visible_flavor
from billeting.api.compute.lookup import Found, cell_unavailable, find, read_cell
from billeting.apidb import build_requests, flavors, images, instance_actions, instance_mappings, request_specs
from billeting.apidb import server_groups as group_store
from billeting.apidb.cell_mappings import CELL0
from billeting.cells import handoff
from billeting.cells import instances as inst
from billeting.cells.health import CellUnavailable
from billeting.conductor.move_protocols import StoredRequestSpec
from billeting.conductor.super_conductor import BuildPlan
from billeting.messaging import BusUnavailable
from billeting.common import gcpause
from billeting.common.db.tx import run_read, run_write
from billeting.common.uuids import normalize_uuid
from billeting.scheduler.nova import BadHint, Unmodelled, domain_hints, unmodelled_keys
from billeting.scheduler.request import Destination

LOG = logging.getLogger(__name__)
# A server's name column (the API database's build requests, the cells' instances).
_NAME_MAX = 255
# Hints are kept with the request spec, a TEXT column: 64 KiB on MySQL/MariaDB,
# which the flavor (see flavors.MAX_SPECS_JSON) and the image share.
MAX_HINTS_JSON = 16384


def ref_id(ref: str | int) -> str:
    """``flavorRef``/``imageRef`` may be an id or a URL ending in one."""
    text = str(ref).strip()
    return text.rstrip("/").rsplit("/", 1)[-1] if "/" in text else text


def _hints(doc: dict) -> dict:
    hints = doc.get("os:scheduler_hints") or doc.get("OS-SCH-HNT:scheduler_hints") or {}
    return hints if isinstance(hints, dict) else {}


def _as_list(value) -> tuple[str, ...]:
    """A hint's value as strings: hints are free-form (any JSON), kept as lists."""
    if value is None:
        return ()
    if isinstance(value, list):
        return tuple(v if isinstance(v, str) else orjson.dumps(v).decode() for v in value)
    return (value if isinstance(value, str) else orjson.dumps(value).decode(),)


def _servers(value) -> tuple[str, ...]:
    """``same_host``/``different_host``: server uuids (the schema checked them)
    in the form the cells store, whatever form the client wrote."""
    return tuple(normalize_uuid(v) for v in _as_list(value))


def flavor_ids(deps: ComputeAPIDeps, ctx: RequestContext) -> dict[str, str]:
    """Flavor name → flavor id, for the ``{"id": ..., "links": ...}`` flavor
    servers show before 2.47 (instances carry the flavor itself, by name)."""
    if ctx.version.at_least(47):
        return {}
    return {f.name: f.flavorid for f in flavors.listing(deps.api_engine)}


def server_bodies(ctx: RequestContext, base: str, ids: dict[str, str]) -> views.ServerBodies:
    """The request's body builder (see ``views.ServerBodies``)."""
    return views.ServerBodies(version=ctx.version, base=base, is_admin=ctx.is_admin, flavor_ids=ids)


def server_body(deps: ComputeAPIDeps, ctx: RequestContext, found: Found, base: str) -> dict:
    """The body of one server (``GET /servers/{id}``, the actions that answer with it)."""
    ids = flavor_ids(deps, ctx)
    if found.cell_down:
        return down_cell_body(deps, ctx, [found], base, ids)[0]
    if found.record is None:
        return server_bodies(ctx, base, ids).detail(server_listing.row_of_build_request(found.build_request))
    fault = None
    if found.record.vm_state.value in views.SHOWS_FAULT:
        engine = deps.cells.engine_of(found.cell) if found.cell else None
        try:
            fault = read_cell(deps, found.cell, lambda: inst.latest_fault(engine, found.record.uuid)) \
                if engine is not None else None
        except CellUnavailable:  # (gone down since the record was read: shown without it)
            fault = None
    return server_bodies(ctx, base, ids).detail(server_listing.row_of_record(found.record, found.cell), fault)


def down_cell_body(deps: ComputeAPIDeps, ctx: RequestContext, found: list[Found], base: str,
                   ids: dict[str, str], *, detail: bool = True) -> list[dict]:
    """The bodies of servers whose cell is down, from the API database (see ``partial``)."""
    if not detail:
        return [partial.index_body(f.mapping.instance_uuid, base) for f in found]
    known = partial.known(deps.api_engine, [f.mapping.instance_uuid for f in found])
    bodies = []
    for f in found:
        server = known.get(f.mapping.instance_uuid) or partial.KnownServer(
            instance_uuid=f.mapping.instance_uuid, project_id=f.mapping.project_id, user_id=f.mapping.user_id,
            created_at=None, spec=None)
        flavorid = ids.get(server.spec.flavor.name) if server.spec is not None else None
        bodies.append(partial.detail_body(server, version=ctx.version, base=base, flavorid=flavorid))
    return bodies


# Query parameters that narrow a listing by what only a cell knows: with any
# of them, the servers of a cell that is down cannot be said to match.
_CELL_FILTERS = ("changes-since", "changes-before", "name", "status", "host", "node", "flavor", "image",
                 "availability_zone", "ip", "ip6", "locked", "tags", "tags-any", "not-tags", "not-tags-any")


def _shows_down(ctx: RequestContext, params, deleted: bool | None) -> bool:
    """Whether a listing shows the servers of cells that are down: from 2.69
    (with their partial bodies, after every other server, oldest first),
    unless it lists deleted servers only or filters on what only their cell
    knows; before 2.69 never."""
    return (ctx.version.at_least(partial.MICROVERSION) and deleted is not True
            and not any(params.get(k) for k in _CELL_FILTERS))


def base_url(req: falcon.Request) -> str:
    return req.prefix  # scheme://host[:port][script_name]


def _check_zone(deps: ComputeAPIDeps, name: str) -> None:
    """Nova refuses an unknown zone at the API, not after scheduling."""
    if name not in availability_zones.zone_names(deps):
        raise bad_request("The requested availability zone is not available")


def _destination(deps: ComputeAPIDeps, ctx: RequestContext, server: dict) -> tuple[str | None, Destination | None]:
    """(zone, requested destination) of a create request, as Nova reads
    them: ``host``/``hypervisor_hostname`` from 2.74, or the older
    ``availability_zone`` forms ``zone:host``, ``zone:host:node`` and
    ``zone::node``; naming a host or node is for admins only. Hosts and
    nodes are looked up now: an unknown one is a 400, not a build that fails."""
    zone, host, node = server.get("availability_zone"), server.get("host"), server.get("hypervisor_hostname")
    if host is not None or node is not None:
        ctx.authorize("compute:servers:create:requested_destination")
    elif zone is not None and ":" in zone and zone not in availability_zones.zone_names(deps):
        # (a zone the scheduler's API named with a ':' in it is a zone, not "zone:host")
        zone, _, rest = zone.partition(":")
        host, _, node = rest.partition(":")
        host, node, zone = host or None, node or None, zone or None
        if host or node:
            ctx.authorize("os_compute_api:servers:create:forced_host")
    if zone is not None:
        _check_zone(deps, zone)
    if host is None and node is None:
        return zone, None
    catalog = deps.scheduler.catalog
    if host is not None and not any(r.service_host == host for r in catalog.by_name(host)):
        raise bad_request(f"Compute host {host} could not be found.")
    if node is not None and not any(node in (r.name, r.uuid) for r in catalog.by_name(node)):
        raise bad_request(f"Compute host node {node} could not be found.")
    return zone, Destination(host=host, node=node)


def _statuses(params) -> set[str]:
    """The ``status`` filter's values (it may repeat), upper case."""
    status = params.get("status")
    return {v.upper() for v in (status if isinstance(status, list) else [status]) if v}


_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})


def _deleted_wanted(ctx: RequestContext, params) -> bool | None:
    """Which servers a listing shows, as Nova decides it: True deleted ones
    only, False live ones only, None both. ``status=DELETED`` (admins only)
    and an admin's ``deleted`` say so; otherwise a listing of what changed
    since a time (``changes-since``, ``changes-before`` from 2.66) includes
    the servers deleted since, so that a client polling for changes sees
    deletions too."""
    if "DELETED" in _statuses(params):
        if not ctx.is_admin:
            raise forbidden("Only administrators may list deleted instances")
        return True
    if ctx.is_admin and "deleted" in params:  # (others' "deleted" is ignored, as in Nova)
        return str(params["deleted"]).lower() in _TRUE
    if params.get("changes-since") or (ctx.version.at_least(66) and params.get("changes-before")):
        return None
    return False


class Servers:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        ctx: RequestContext = req.context.nova
        doc = schemas.body(req)
        schemas.check(doc, schemas.SERVER_CREATE)
        ctx.authorize("os_compute_api:servers:create")
        server = doc["server"]
        for key in ("host", "hypervisor_hostname"):
            if key in server and not ctx.version.at_least(74):
                raise bad_request(f"Invalid input for field/attribute server. Value: {key}. Additional properties "
                                  f"are not allowed ('{key}' was unexpected) before microversion 2.74")
        if ctx.version.at_least(37) and "networks" not in server:
            raise bad_request("Invalid input for field/attribute server. Value: networks is a required property "
                              "at this microversion; use \"none\" or \"auto\".")
        flavor = visible_flavor(self.deps, ctx, ref_id(server["flavorRef"]))
        if flavor is None or flavor.disabled:
            raise bad_request(f"Flavor {ref_id(server['flavorRef'])} could not be found.")
        image = None
        image_ref = ref_id(server.get("imageRef") or "")
        if image_ref:
            found_image = images.get(self.deps.api_engine, image_ref)
            if found_image is None:
                raise bad_request(f"Image {image_ref} could not be found.")
            image = found_image.scheduler_image()
        elif not server.get("block_device_mapping_v2"):
            raise bad_request("Block Device Mapping is Invalid: imageRef is required unless booting from a "
                              "volume.")
        if unmodelled_keys(flavor.scheduler_flavor(), image):
            raise bad_request(str(Unmodelled(flavor.scheduler_flavor(), image)))
        min_count, max_count = int(server.get("min_count", 1)), int(server.get("max_count",
                                                                              server.get("min_count", 1)))
        if min_count > max_count:
            raise bad_request("min_count must be <= max_count")
        if max_count > 1000:
            raise bad_request("max_count must be at most 1000")
        hints = _hints(doc)
        if len(orjson.dumps(hints)) > MAX_HINTS_JSON:
            raise bad_request(f"Invalid input for field/attribute os:scheduler_hints. The hints take at most "
                              f"{MAX_HINTS_JSON} bytes as JSON.")
        for key in ("same_host", "different_host"):
            if key in hints:
                hints = {**hints, key: list(_servers(hints[key]))}
        group = hints.get("group")
        if group is not None:
            group = normalize_uuid(group)
            stored = run_read(self.deps.api_engine, lambda conn: group_store.get(conn, group))
            if stored is None or (not ctx.is_admin and stored.project_id != ctx.project_id):
                raise bad_request(f"Invalid input for field/attribute group. Value: {group}. "
                                  f"Server group {group} could not be found.")
        name = server["name"]
        if max_count > 1 and len(name) + len(f"-{max_count}") > _NAME_MAX:
            # each server is named "name-N", and a name column holds 255 characters
            raise bad_request(f"Invalid input for field/attribute name. With max_count {max_count} the servers "
                              f"are named {name[:20]}...-N, which must be at most {_NAME_MAX} characters: "
                              f"the name may have {_NAME_MAX - len(f'-{max_count}')}.")
        uuids = tuple(str(uuidlib.uuid4()) for _ in range(max_count))
        names = tuple(f"{name}-{i + 1}" if max_count > 1 else name for i in range(max_count))
        az, destination = _destination(self.deps, ctx, server)
        is_bfv = not image_ref
        try:
            constraints, near = domain_hints({k: _as_list(v) for k, v in hints.items()},
                                             self.deps.scheduler.directory)
        except BadHint as exc:
            raise bad_request(f"Invalid input for field/attribute os:scheduler_hints. {exc}") from None
        plan = BuildPlan(request_id=ctx.request_id, instance_uuids=uuids, names=names, project_id=ctx.project_id,
                         user_id=ctx.user_id, flavor=flavor.scheduler_flavor(), image=image, is_bfv=is_bfv,
                         availability_zone=az, destination=destination, server_group=group,
                         same_host=_as_list(hints.get("same_host")),
                         different_host=_as_list(hints.get("different_host")),
                         domain_constraints=constraints, near=near)

        def record(conn: Connection) -> None:
            for uuid, each in zip(uuids, names):
                build_requests.add(conn, instance_uuid=uuid, project_id=ctx.project_id, user_id=ctx.user_id,
                                   name=each, flavor=plan.flavor, image=image, availability_zone=az)
                instance_mappings.add(conn, instance_uuid=uuid, project_id=ctx.project_id, user_id=ctx.user_id)
                request_specs.add(conn, StoredRequestSpec(
                    instance_uuid=uuid, project_id=ctx.project_id, user_id=ctx.user_id, flavor=plan.flavor,
                    image=image, is_bfv=is_bfv, availability_zone=az, server_group=group,
                    hints={k: list(_as_list(v)) for k, v in hints.items() if k != "group"}))

        run_write(self.deps.api_engine, record)
        for uuid in uuids:
            instance_actions.record(self.deps.api_engine, instance_uuid=uuid, action="create",
                                    request_id=ctx.request_id, project_id=ctx.project_id, user_id=ctx.user_id)
        try:
            self.deps.cast_build(plan)
        except BusUnavailable as exc:
            # Nobody will build what was not handed over: take it back, and
            # let the client retry once the bus is back.
            LOG.warning("request %s: the message bus refused the build (%s); nothing kept", ctx.request_id, exc)
            build_requests.withdraw(self.deps.api_engine, uuids)
            raise NovaError(503, "The message bus is unavailable; no server was created. Please retry.") from None
        resp.status = falcon.HTTP_202
        if str(server.get("return_reservation_id", "")).lower() == "true":
            resp.media = {"reservation_id": f"r-{uuids[0][:8]}"}
            return
        first = uuids[0]
        resp.location = f"{base_url(req)}/v2.1/servers/{first}"
        resp.media = {"server": {"id": first, "links": views.link(base_url(req), "servers", first),
                                 "OS-DCF:diskConfig": server.get("OS-DCF:diskConfig", "MANUAL"),
                                 "security_groups": [{"name": "default"}],
                                 "adminPass": server.get("adminPass") or uuidlib.uuid4().hex[:12]}}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._list(req, resp, detail=False)

    def on_get_detail(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._list(req, resp, detail=True)

    def _list(self, req: falcon.Request, resp: falcon.Response, *, detail: bool) -> None:
        ctx: RequestContext = req.context.nova
        listing = "detail" if detail else "index"
        ctx.authorize(f"os_compute_api:servers:{listing}")
        params = req.params
        all_tenants = str(params.get("all_tenants", "false")).lower() in ("", "1", "true", "yes", "on") \
            if "all_tenants" in params else False
        if all_tenants:
            ctx.authorize(f"os_compute_api:servers:{listing}:get_all_tenants")
        project = None if (ctx.is_admin and all_tenants) else (
            params.get("project_id") or params.get("tenant_id") if ctx.is_admin else ctx.project_id)
        if ctx.is_admin and not all_tenants and project is None:
            project = ctx.project_id
        deleted = _deleted_wanted(ctx, params)
        limit = paging.limit_of(params)  # (a bad limit is refused before anything is read)
        order = server_sort.complete(server_sort.order(ctx, params))
        ids = flavor_ids(self.deps, ctx)
        filters = server_listing.filters_of(ctx, params, project=project, deleted=deleted,
                                            statuses=_statuses(params), flavor_ids=ids)
        # A page of a thousand bodies makes tens of thousands of small
        # containers: the collector runs rarely meanwhile (see gcpause).
        with gcpause.paused():
            listed = server_listing.list_servers(self.deps, ctx, filters=filters, order=order,
                                                 marker=params.get("marker"), limit=limit,
                                                 shows_down=_shows_down(ctx, params, deleted), detail=detail)
            base = base_url(req)
            view = server_bodies(ctx, base, ids)
            if detail:  # (the rows hold what the bodies show: nothing else is read but faults)
                faults = server_listing.faults(self.deps, listed.rows)
                shown = [view.detail(r, faults.get(r.uuid)) for r in listed.rows]
            else:
                shown = [view.index(r.uuid, r.name) for r in listed.rows]
            if listed.down:  # after every other server (see _shows_down)
                shown += down_cell_body(self.deps, ctx, listed.down, base, ids, detail=detail)
            links = (paging.next_link(req, "servers/detail" if detail else "servers", limit, shown[-1]["id"])
                     if listed.more and shown else [])
            resp.data = orjson.dumps({"servers": shown, **({"servers_links": links} if links else {})})


class Server:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = find(self.deps, ctx, server_id, partial=ctx.version.at_least(partial.MICROVERSION))
        ctx.authorize("os_compute_api:servers:show", found.mapping.project_id)
        resp.media = {"server": server_body(self.deps, ctx, found, base_url(req))}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        ctx: RequestContext = req.context.nova
        found = find(self.deps, ctx, server_id)
        ctx.authorize("os_compute_api:servers:delete", found.mapping.project_id)
        server_locks.check(found, ctx, "delete")
        uuid = found.mapping.instance_uuid
        instance_actions.record(self.deps.api_engine, instance_uuid=uuid, action="delete", request_id=ctx.request_id,
                                project_id=ctx.project_id, user_id=ctx.user_id, finished=True)
        if found.cell is None or found.record is None:
            # Not handed to a cell yet: removing the build request is the delete.
            # The super conductor sees it gone and gives its claim back; one
            # that failed or died holding it cannot, so the claim goes here too
            # (harmless either way: the server is gone).
            if build_requests.remove(self.deps.api_engine, uuid):
                instance_mappings.mark_deleted(self.deps.api_engine, uuid)
                _release_claim(self.deps, uuid)
                resp.status = falcon.HTTP_204
                return
            found = find(self.deps, ctx, server_id)
            if found.record is None:
                resp.status = falcon.HTTP_204
                return
        cell = found.cell
        engine = self.deps.cells.engine_of(cell)
        bus = None if cell == CELL0 else self.deps.cells.bus_of(cell)
        try:
            self.deps.cells.read(cell, lambda: handoff.request_delete(
                engine, bus, uuid, down_time_s=self.deps.service_down_time_s), deadline=False)
        except CellUnavailable as exc:
            raise cell_unavailable(exc) from None
        instance_mappings.mark_deleted(self.deps.api_engine, uuid)
        resp.status = falcon.HTTP_204


def _release_claim(deps: ComputeAPIDeps, uuid: str) -> None:
    client = getattr(deps.scheduler, "client", None)
    if client is None:
        return
    try:
        client.delete_allocations(uuid)
    except Exception:  # noqa: BLE001 - the audit removes what is left; the delete itself is done
        LOG.warning("could not delete the allocations of deleted server %s; the audit will", uuid, exc_info=True)
