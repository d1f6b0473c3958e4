"""``GET /os-migrations`` (every cell's migrations) and
``GET /servers/{id}/migrations[/{migration_id}]`` (a server's live migrations
in progress), in Nova's shapes for the negotiated microversion.

Migration ids are the row ids of each cell's database, as in Nova: two cells
can show the same id, so clients that need a unique key use ``uuid`` (2.59+).
"""
from __future__ import annotations

from billeting.api.compute import paging, views
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import not_found
from billeting.api.compute.lookup import find
from billeting.api.compute.servers import base_url
from billeting.apidb import flavors, instance_mappings
from billeting.cells import moves as migrations
from billeting.cells.moves import MigrationRecord

_LIVE_IN_PROGRESS = {"queued", "preparing", "running", "accepted"}


def _in_progress_live(m: MigrationRecord) -> bool:
    return m.migration_type == "live-migration" and m.status in _LIVE_IN_PROGRESS


def _owners(deps: ComputeAPIDeps, uuids: set[str]) -> dict[str, tuple[str, str]]:
    found = {}
    for uuid in uuids:
        mapping = instance_mappings.get(deps.api_engine, uuid)
        if mapping is not None:
            found[uuid] = (mapping.project_id, mapping.user_id)
    return found


def _view(m: MigrationRecord, ctx: RequestContext, base: str, flavor_ids: dict[str, int],
          owner: tuple[str, str] | None) -> dict:
    body = {"id": m.id, "instance_uuid": m.instance_uuid, "status": m.status,
            "source_compute": m.source_compute, "source_node": m.source_node,
            "dest_compute": m.dest_compute, "dest_node": m.dest_node, "dest_host": None,
            "old_instance_type_id": flavor_ids.get(m.old_flavor.name) if m.old_flavor else None,
            "new_instance_type_id": flavor_ids.get(m.new_flavor.name) if m.new_flavor else None,
            "created_at": views.iso_micro(m.created_at), "updated_at": views.iso_micro(m.updated_at)}
    if ctx.version.at_least(23):
        body["migration_type"] = m.migration_type
        if _in_progress_live(m):
            body["links"] = views.link(base, "servers", m.instance_uuid, "migrations", str(m.id))
    if ctx.version.at_least(59):
        body["uuid"] = m.uuid
    if ctx.version.at_least(80):
        body["project_id"], body["user_id"] = owner or (None, None)
    return body


def _server_view(m: MigrationRecord, ctx: RequestContext, owner: tuple[str, str] | None) -> dict:
    body = {"id": m.id, "server_uuid": m.instance_uuid, "status": m.status,
            "source_compute": m.source_compute, "source_node": m.source_node,
            "dest_compute": m.dest_compute, "dest_node": m.dest_node, "dest_host": None,
            "created_at": views.iso_micro(m.created_at), "updated_at": views.iso_micro(m.updated_at),
            # The fake hypervisor does not report copy progress.
            "memory_total_bytes": None, "memory_processed_bytes": None, "memory_remaining_bytes": None,
            "disk_total_bytes": None, "disk_processed_bytes": None, "disk_remaining_bytes": None}
    if ctx.version.at_least(59):
        body["uuid"] = m.uuid
    if ctx.version.at_least(80):
        body["project_id"], body["user_id"] = owner or (None, None)
    return body


class Migrations:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-migrations:index")
        params = req.params
        found: list[MigrationRecord] = []
        for _, handle in sorted(self.deps.cells.cells().items()):
            found.extend(migrations.listing(handle.engine))
        found.sort(key=lambda m: (m.created_at, m.id), reverse=True)
        if params.get("host"):
            found = [m for m in found if params["host"] in (m.source_compute, m.dest_compute)]
        for key in ("status", "source_compute", "instance_uuid"):
            if params.get(key):
                found = [m for m in found if getattr(m, key) == params[key]]
        if params.get("migration_type") and ctx.version.at_least(23):
            found = [m for m in found if m.migration_type == params["migration_type"]]
        owners = _owners(self.deps, {m.instance_uuid for m in found})
        if ctx.version.at_least(80):
            for key, index in (("project_id", 0), ("user_id", 1)):
                if params.get(key):
                    found = [m for m in found if owners.get(m.instance_uuid, (None, None))[index] == params[key]]
        links = []
        if ctx.version.at_least(59):
            found, links = paging.page(found, req, "os-migrations", lambda m: m.uuid,
                                       f"Marker {params.get('marker')} could not be found.")
        ids = {f.name: f.id for f in flavors.listing(self.deps.api_engine)}
        base = base_url(req)
        resp.media = {"migrations": [_view(m, ctx, base, ids, owners.get(m.instance_uuid)) for m in found],
                      **({"migrations_links": links} if links else {})}


class ServerMigrations:
    """A server's live migrations in progress (2.23+; admin)."""

    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def _live(self, req, server_id: str, rule: str) -> tuple[RequestContext, list[MigrationRecord], tuple[str, str]]:
        ctx: RequestContext = req.context.nova
        if not ctx.version.at_least(23):
            raise not_found("The resource could not be found.")
        found = find(self.deps, ctx, server_id)
        ctx.authorize(rule, found.mapping.project_id)
        engine = self.deps.cells.engine_of(found.cell) if found.cell else None
        listed = migrations.listing(engine, instance_uuids=[found.mapping.instance_uuid]) if engine else []
        owner = (found.mapping.project_id, found.mapping.user_id)
        return ctx, [m for m in listed if _in_progress_live(m)], owner

    def on_get(self, req, resp, server_id: str) -> None:
        ctx, live, owner = self._live(req, server_id, "os_compute_api:servers:migrations:index")
        resp.media = {"migrations": [_server_view(m, ctx, owner) for m in live]}

    def on_get_one(self, req, resp, server_id: str, migration_id: str) -> None:
        ctx, live, owner = self._live(req, server_id, "os_compute_api:servers:migrations:show")
        match = [m for m in live if str(m.id) == migration_id]
        if not match:
            raise not_found(f"In-progress live migration {migration_id} is not found for server {server_id}.")
        resp.media = {"migration": _server_view(match[0], ctx, owner)}
