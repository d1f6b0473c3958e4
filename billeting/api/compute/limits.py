"""``GET /limits``: what a project uses, and no quota (every maximum -1).

Billeting enforces no quotas; Nova with its no-op quota driver answers the
same way. Clients (``openstack limits show``, dashboards, Terraform) read
this document to show usage, so the totals are real: the project's servers
that are not deleted (built, building or in ERROR) and its server groups.
"""
from __future__ import annotations

from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.lookup import find_many
from billeting.apidb import instance_mappings
from billeting.apidb import server_groups as group_store
from billeting.cells.instances import VmState
from billeting.common.db.tx import run_read

UNLIMITED = -1


def usage(deps: ComputeAPIDeps, project_id: str) -> dict[str, int]:
    found = find_many(deps, instance_mappings.listing(deps.api_engine, project_id=project_id))
    flavors = [f.record.flavor if f.record is not None else f.build_request.flavor for f in found
               if f.record is None or f.record.vm_state != VmState.DELETED]
    groups = run_read(deps.api_engine, lambda conn: group_store.list_groups(conn, project_id=project_id))
    return {"totalCoresUsed": sum(f.vcpus for f in flavors), "totalInstancesUsed": len(flavors),
            "totalRAMUsed": sum(f.memory_mb for f in flavors), "totalServerGroupsUsed": len(groups)}


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
