"""``GET /limits`` counts a project's usage in each cell's SQL
(``cells.usage``): the totals must be those of reading every server, on
every backend, with servers in every state, in cell0, only as build
requests, and one caught between its build request and its cell."""
from __future__ import annotations

import random

import msgspec
from sqlalchemy import update

from billeting.apidb import build_requests
from billeting.cells import tables as ct
from billeting.common.db.tx import run_write
from billeting.scheduler.nova import Flavor
from tests.api.compute.test_listing_reference import (  # noqa: F401
    PROJECTS,
    _servers,
    _write,
    handed_over_after_the_first_read,
    listing_plane,
)

BIG = Flavor(vcpus=7, memory_mb=12288, root_gb=3, name="large", extra_specs={"hw:cpu_policy": "dedicated"})


def test_limits_count_what_reading_every_server_counts(listing_plane, api_engine):
    client, engines, _ = listing_plane
    rng = random.Random(5)
    servers = _servers(rng, 70)
    _write(api_engine, engines, servers)  # (every flavor: 1 vCPU, 512 MB)
    big = {s.uuid for s in servers[::3] if s.cell}
    for s in servers:
        if s.uuid in big:
            run_write(engines[s.cell], lambda conn, s=s: conn.execute(update(ct.instances).where(
                ct.instances.c.uuid == s.uuid).values(flavor=msgspec.json.encode(BIG).decode())))
    # handed to cell1 while its build request is still there: counted once
    caught = next(s for s in servers if s.cell == "cell1" and s.vm_state == "active" and s.uuid not in big)
    run_write(api_engine, lambda conn: build_requests.add(
        conn, instance_uuid=caught.uuid, project_id=caught.project_id, user_id=caught.user_id, name=caught.name,
        flavor=Flavor(vcpus=1, memory_mb=512, root_gb=1), image=None, availability_zone=None))
    seen = set()
    for project in PROJECTS:
        live = [s for s in servers if s.project_id == project and s.vm_state != "deleted"]
        want = (len(live), sum(7 if s.uuid in big else 1 for s in live),
                sum(12288 if s.uuid in big else 512 for s in live))
        r = client.simulate_get("/v2.1/limits", query_string=f"tenant_id={project}",
                                headers={"X-Auth-Token": "admin"})
        assert r.status_code == 200, r.text
        used = r.json["limits"]["absolute"]
        assert (used["totalInstancesUsed"], used["totalCoresUsed"], used["totalRAMUsed"]) == want, project
        seen |= {(s.cell, s.vm_state) for s in live}
    # the projects held servers in cell0, in the cells and as build requests, in several states
    assert {c for c, _ in seen} >= {"cell0", "cell1", "cell2", None} and len(seen) > 8, seen


def test_a_server_handed_to_its_cell_while_the_cell_is_read_counts_once(listing_plane, api_engine, monkeypatch):
    """The build requests are read, then each cell: a server that reaches
    its cell after the cell's count but before the cell says which queued
    servers it holds would be counted nowhere. One statement answers both."""
    from billeting.api.compute import limits

    client, engines, _ = listing_plane
    _, moved = handed_over_after_the_first_read(monkeypatch, limits, api_engine, engines, 9)
    r = client.simulate_get("/v2.1/limits", query_string="tenant_id=p-moving", headers={"X-Auth-Token": "admin"})
    assert r.status_code == 200, r.text
    assert moved and r.json["limits"]["absolute"]["totalInstancesUsed"] == 1
    r = client.simulate_get("/v2.1/limits", query_string="tenant_id=p-moving", headers={"X-Auth-Token": "admin"})
    assert r.json["limits"]["absolute"]["totalInstancesUsed"] == 1  # now in the cell and still queued: once
