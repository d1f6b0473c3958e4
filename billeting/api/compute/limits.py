"""``GET /limits``: what a project uses, and no quota (every maximum -1).

Billeting enforces no quotas; Nova with its no-op quota driver answers the
same way. Clients (``openstack limits show``, dashboards, Terraform) read
this document to show usage, so the totals are real: the project's servers
that are not deleted (built, building or in ERROR) and its server groups.
"""
from __future__ import annotations

from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.lookup import read_cell
from billeting.apidb import build_requests
from billeting.apidb import server_groups as group_store
from billeting.cells.health import CellUnavailable
from billeting.cells.usage import Usage, project_usage
from billeting.common.db.tx import run_read

UNLIMITED = -1


def usage(deps: ComputeAPIDeps, project_id: str) -> dict[str, int]:
    """The project's totals: each cell counts its own servers in SQL (a cell
    that does not answer counts none), and the build requests add the
    servers no cell holds yet. The build requests are read first: a server
    handed to its cell meanwhile is then counted there, and only there (the
    cell's count and which queued servers it holds come from one statement)."""
    queued = build_requests.listing(deps.api_engine, project_id=project_id)
    uuids = [br.instance_uuid for br in queued]
    total = Usage()
    placed: set[str] = set()
    for cell, engine in sorted(deps.cells.all_engines().items()):
        try:
            used, held = read_cell(deps, cell, lambda: project_usage(engine, project_id, uuids))
            total += used
            placed |= held
        except CellUnavailable:
            continue
    for br in queued:
        if br.instance_uuid not in placed:
            total += Usage(instances=1, vcpus=br.flavor.vcpus, memory_mb=br.flavor.memory_mb)
    groups = run_read(deps.api_engine, lambda conn: group_store.list_groups(conn, project_id=project_id))
    return {"totalCoresUsed": total.vcpus, "totalInstancesUsed": total.instances,
            "totalRAMUsed": total.memory_mb, "totalServerGroupsUsed": len(groups)}


def absolute(ctx: RequestContext, used: dict[str, int]) -> dict[str, int]:
    body = dict.fromkeys(("maxImageMeta", "maxServerMeta", "maxTotalCores", "maxTotalInstances", "maxTotalKeypairs",
                          "maxTotalRAMSize", "maxServerGroups", "maxServerGroupMembers"), UNLIMITED)
    if not ctx.version.at_least(36):  # network proxies, gone from 2.36
        body.update({"maxSecurityGroups": UNLIMITED, "maxSecurityGroupRules": UNLIMITED,
                     "maxTotalFloatingIps": UNLIMITED, "totalSecurityGroupsUsed": 0, "totalFloatingIpsUsed": 0})
    if not ctx.version.at_least(57):  # file injection, gone from 2.57
        body.update({"maxPersonality": UNLIMITED, "maxPersonalitySize": UNLIMITED})
    body.update(used)
    return body


class Limits:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:limits")
        project = ctx.project_id
        other = req.params.get("tenant_id")
        if other and other != project:
            ctx.authorize("os_compute_api:limits:other_project", other)
            project = other
        resp.media = {"limits": {"absolute": absolute(ctx, usage(self.deps, project)), "rate": []}}
