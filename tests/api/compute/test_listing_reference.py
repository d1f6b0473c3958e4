"""Server listings across cells against a plain reference: everything read,
filtered, sorted and paged in Python, over many random queries.

The listing merges each cell's first rows after the marker (see
api/compute/server_listing.py); the reference here reads every record of
every cell and every build request, and does what the API promised before
the listing scaled: filters on the server as shown, stable sorts least
significant key first on a list newest first, NULLs first ascending, the
marker looked up among what the filters keep (400 otherwise). Rows are
written straight into two cells, cell0 and the API database, with ties on
every sort key (names, times to the second, hosts) so that the order's tie
breaks are exercised too.
"""
from __future__ import annotations

import datetime as dt
import random
import re
import uuid as uuidlib
from urllib.parse import urlencode

import falcon.testing
import msgspec
import pytest
from sqlalchemy import insert

from billeting.api.compute import views
from billeting.api.compute.plane import ControlPlane
from billeting.apidb import build_requests, cell_mappings, flavors, instance_mappings
from billeting.apidb.cell_directory import CellCatalog
from billeting.cells import instances as inst
from billeting.cells import tables as ct
from billeting.cells.messages import RequestSummary
from billeting.conductor.move_protocols import CellHandle
from billeting.common.db.tx import run_write
from billeting.scheduler.nova import Flavor, Image
from tests.support.wait import wait_for

CELLS = ("cell1", "cell2")
PROJECTS = ("admin", "p1", "p2")
NAMES = ("a", "b", "ab", "ba", "vm-1", "vm-2", "Vm-3", "abc", "x")
HOSTS = ("host1", "host2", "host3")
ZONES = (None, "az1", "az2")
FLAVORS = {"small": "1", "large": "2", "tiny": "t 1"}  # name -> flavorid
IMAGES = (None, "cirros", "fedora")
# (vm_state, task_state) a record may be in, with how it shows
STATES = (("active", None), ("active", "migrating"), ("active", "deleting"), ("building", "scheduling"),
          ("building", "spawning"), ("error", None), ("deleted", None), ("resized", None),
          ("resized", "resize_reverting"), ("active", "resize_prep"))
BASE = dt.datetime(2030, 1, 1, 12, 0, 0)
SORT_KEYS = ("display_name", "hostname", "created_at", "updated_at", "launched_at", "terminated_at", "uuid",
             "project_id", "user_id", "vm_state", "task_state", "power_state", "availability_zone", "host", "node",
             "key_name")
_enc = msgspec.json.Encoder().encode


class Server(msgspec.Struct, kw_only=True):
    """A server as the reference sees it."""
    uuid: str
    cell: str | None
    name: str
    project_id: str
    user_id: str
    vm_state: str
    task_state: str | None
    host: str | None
    node: str | None
    az: str | None
    flavor: str
    image: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    launched_at: dt.datetime | None
    deleted_at: dt.datetime | None


def _when(rng: random.Random) -> dt.datetime:
    return BASE + dt.timedelta(seconds=rng.randrange(0, 40))  # many ties, whole seconds on every backend


def _servers(rng: random.Random, count: int) -> list[Server]:
    made = []
    for i in range(count):
        cell = rng.choice((*CELLS, *CELLS, "cell0", None))  # None: only a build request
        vm, task = ("building", "scheduling") if cell is None else (
            ("error", None) if cell == "cell0" else rng.choice(STATES))
        placed = cell not in (None, "cell0") and vm != "error"
        host = rng.choice(HOSTS) if placed and rng.random() < 0.9 else None
        created = _when(rng)
        made.append(Server(
            uuid=str(uuidlib.UUID(int=rng.getrandbits(128))), cell=cell, name=rng.choice(NAMES),
            project_id=rng.choice(PROJECTS), user_id=rng.choice(("u1", "u2")), vm_state=vm, task_state=task,
            host=host, node=f"{host}-n{rng.randrange(2)}" if host else None,
            az=rng.choice(ZONES), flavor=rng.choice(sorted(FLAVORS)), image=rng.choice(IMAGES),
            created_at=created, updated_at=created if cell is None else created + dt.timedelta(
                seconds=rng.randrange(0, 20)),
            launched_at=created + dt.timedelta(seconds=rng.randrange(1, 5)) if vm in ("active", "resized")
            and rng.random() < 0.8 else None,
            deleted_at=created + dt.timedelta(seconds=30) if vm == "deleted" else None))
    return made


def _write(api_engine, engines: dict, servers: list[Server], *, api_rows: bool = True) -> None:
    """The servers' rows: in the API database (unless ``api_rows`` is false:
    already written there) and in their cells."""
    for s in servers:
        flavor = Flavor(vcpus=1, memory_mb=512, root_gb=1, name=s.flavor)
        image = Image(id=s.image) if s.image else None

        def add_api_rows(conn, s=s, flavor=flavor, image=image):
            instance_mappings.add(conn, instance_uuid=s.uuid, project_id=s.project_id, user_id=s.user_id)
            if s.cell is None:
                build_requests.add(conn, instance_uuid=s.uuid, project_id=s.project_id, user_id=s.user_id,
                                   name=s.name, flavor=flavor, image=image, availability_zone=s.az)
                conn.execute(ct_build_requests().update().where(
                    ct_build_requests().c.instance_uuid == s.uuid).values(created_at=s.created_at))

        if api_rows:
            run_write(api_engine, add_api_rows)
        if s.cell is None:
            continue
        instance_mappings.set_cell(api_engine, s.uuid, s.cell)
        summary = RequestSummary(project_id=s.project_id, user_id=s.user_id)
        run_write(engines[s.cell], lambda conn, s=s, flavor=flavor, image=image, summary=summary: conn.execute(
            insert(ct.instances).values(
                uuid=s.uuid, name=s.name, project_id=s.project_id, user_id=s.user_id, vm_state=s.vm_state,
                task_state=s.task_state, host=s.host, node=s.node, availability_zone=s.az,
                flavor=_enc(flavor).decode(), image=_enc(image).decode() if image else None,
                request=_enc(summary).decode(), alternates="[]", num_attempts=1, hosts_tried="[]",
                created_at=s.created_at, updated_at=s.updated_at, launched_at=s.launched_at,
                deleted_at=s.deleted_at)))


def ct_build_requests():
    from billeting.apidb import tables as at
    return at.build_requests


# --- the reference ---------------------------------------------------------------------

def _status(s: Server) -> str:
    return views.status(s.vm_state, s.task_state)


def _value(s: Server, key: str):
    return {"display_name": s.name, "hostname": s.name, "created_at": s.created_at, "updated_at": s.updated_at,
            "launched_at": s.launched_at, "terminated_at": s.deleted_at, "uuid": s.uuid,
            "project_id": s.project_id, "user_id": s.user_id, "vm_state": s.vm_state, "task_state": s.task_state,
            "power_state": 1 if s.vm_state in ("active", "resized") else 0, "availability_zone": s.az,
            "host": s.host, "node": s.node}[key]


def _time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def reference(servers: list[Server], query: list[tuple[str, str]], *, project: str, admin: bool,
              version: int) -> tuple[int, list[str], bool]:
    """(status, ids of the page, whether a next link is given)."""
    params: dict[str, list[str]] = {}
    for k, v in query:
        params.setdefault(k, []).append(v)
    one = {k: v[-1] for k, v in params.items()}
    all_tenants = "all_tenants" in one and one["all_tenants"].lower() in ("", "1", "true", "yes", "on")
    owner = None if admin and all_tenants else (one.get("project_id") or one.get("tenant_id") or project
                                                if admin else project)
    statuses = {v.upper() for v in params.get("status", []) if v}
    if "DELETED" in statuses:
        deleted = True
    elif admin and "deleted" in one:
        deleted = one["deleted"].lower() in ("1", "t", "true", "on", "y", "yes")
    elif one.get("changes-since") or (version >= 66 and one.get("changes-before")):
        deleted = None
    else:
        deleted = False
    since = _time(one["changes-since"]) if one.get("changes-since") else None
    before = _time(one["changes-before"]) if version >= 66 and one.get("changes-before") else None
    ids = {} if version >= 47 else dict(FLAVORS)

    def keeps(s: Server) -> bool:
        shown_updated = s.updated_at.replace(microsecond=0)
        return ((owner is None or s.project_id == owner)
                and (deleted is None or (s.vm_state == "deleted") == deleted)
                and (since is None or shown_updated >= since) and (before is None or shown_updated <= before)
                and (not one.get("name") or re.search(one["name"], s.name) is not None)
                and (not statuses or _status(s) in statuses)
                and (not one.get("host") or s.host == one["host"])
                and (not one.get("node") or s.node == one["node"])
                and (not one.get("flavor") or s.flavor == one["flavor"] or ids.get(s.flavor) == one["flavor"])
                and (not one.get("image") or s.image == one["image"])
                and (not one.get("availability_zone") or (s.az or "") == one["availability_zone"]))

    listed = sorted((s for s in servers if keeps(s)), key=lambda s: (s.created_at, s.uuid), reverse=True)
    keys, dirs = params.get("sort_key", []), params.get("sort_dir", [])
    if dirs and not keys:
        keys = ["created_at"]
    for i in reversed(range(len(keys))):
        if keys[i] == "key_name":
            continue
        descending = (dirs[i] if i < len(dirs) else dirs[0] if dirs else "desc") == "desc"
        listed.sort(key=lambda s, k=keys[i]: ((v := _value(s, k)) is not None, v if v is not None else 0),
                    reverse=descending)
    ordered = [s.uuid for s in listed]
    if "marker" in one:
        if one["marker"] not in ordered:
            return 400, [], False
        ordered = ordered[ordered.index(one["marker"]) + 1:]
    if "limit" not in one:
        return 200, ordered, False
    limit = int(one["limit"])
    return 200, ordered[:limit], len(ordered) > limit and limit > 0


# --- the random queries ----------------------------------------------------------------

def _query(rng: random.Random, servers: list[Server], admin: bool, version: int) -> list[tuple[str, str]]:
    q: list[tuple[str, str]] = []
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        key = rng.choice(SORT_KEYS if admin else [k for k in SORT_KEYS if k not in ("host", "node")])
        q.append(("sort_key", key))
    for _ in range(rng.randrange(0, 1 + sum(k == "sort_key" for k, _ in q))):
        q.append(("sort_dir", rng.choice(("asc", "desc"))))
    filters = {
        "name": lambda: rng.choice(("^a", "b", "a.c", "^vm-", "-[12]$", "V", "z")),
        "status": lambda: rng.choice(("ACTIVE", "ERROR", "BUILD", "MIGRATING", "VERIFY_RESIZE", "REVERT_RESIZE",
                                      "RESIZE", "active")),
        "flavor": lambda: rng.choice((*FLAVORS, *FLAVORS.values())),
        "image": lambda: rng.choice(("cirros", "fedora")),
        "availability_zone": lambda: rng.choice(("az1", "az2")),
        "changes-since": lambda: (BASE + dt.timedelta(seconds=rng.randrange(0, 60))).isoformat() + "Z",
    }
    if admin:
        filters |= {"host": lambda: rng.choice(HOSTS), "node": lambda: rng.choice(HOSTS) + "-n0",
                    "deleted": lambda: rng.choice(("true", "false")), "all_tenants": lambda: "1",
                    "project_id": lambda: rng.choice(PROJECTS)}
    if version >= 66:
        filters["changes-before"] = lambda: (BASE + dt.timedelta(seconds=rng.randrange(10, 70))).isoformat()
    for name in rng.sample(sorted(filters), rng.choice((0, 1, 1, 2, 3))):
        q.append((name, filters[name]()))
    if admin and rng.random() < 0.3:
        q.append(("all_tenants", "true"))
    if any(k == "status" for k, _ in q) and rng.random() < 0.3:
        q.append(("status", rng.choice(("ERROR", "BUILD"))))  # repeated: either
    if rng.random() < 0.6:
        q.append(("limit", str(rng.choice((0, 1, 2, 3, 5, 8, 20)))))
    if rng.random() < 0.6:
        q.append(("marker", rng.choice(servers).uuid))
    return q


@pytest.fixture
def listing_plane(deployment, api_engine):
    engines = {}
    for name in ("cell0", *CELLS):
        wiring = deployment.cell(name)
        cell_mappings.ensure_cell(api_engine, name=name, database_connection=str(wiring.cell.database_url),
                                  transport_url=wiring.cell.transport_url)
        engines[name] = wiring.engine
    for name, fid in FLAVORS.items():
        flavors.create(api_engine, flavorid=fid, name=name, memory_mb=512, vcpus=1, root_gb=1)
    handles = {n: CellHandle(n, deployment.cells[n].engine, deployment.cells[n].bus) for n in CELLS}
    catalog = CellCatalog(api_engine, handles, deployment.cells["cell0"].engine)
    plane = ControlPlane(api_engine=api_engine, cells=catalog, placement=deployment.placement,
                         catalog_refresh_s=0.0)
    yield falcon.testing.TestClient(plane.app()), engines, catalog
    plane.close()


def test_listings_match_a_reference_that_reads_everything(listing_plane, api_engine):
    client, engines, _ = listing_plane
    rng = random.Random(29)
    servers = _servers(rng, 90)
    _write(api_engine, engines, servers)
    assert {inst.get(engines[s.cell], s.uuid) is not None for s in servers if s.cell} == {True}
    seen_pages = seen_400 = seen_links = 0
    for i in range(300):
        token, admin, project = rng.choice((("admin", True, "admin"), ("admin:p1", True, "p1"),
                                            ("alice:p1", False, "p1"), ("bob:p2", False, "p2")))
        version = rng.choice((1, 47, 66, 90))
        query = _query(rng, servers, admin, version)
        path = rng.choice(("/v2.1/servers", "/v2.1/servers/detail"))
        r = client.simulate_get(path, query_string=urlencode(query),
                                headers={"X-Auth-Token": token, "OpenStack-API-Version": f"compute 2.{version}"})
        want_status, want_ids, want_link = reference(servers, query, project=project, admin=admin, version=version)
        context = f"query {i}: {token} 2.{version} {path}?{urlencode(query)}"
        assert r.status_code == want_status, (context, r.text)
        if want_status != 200:
            assert "marker" in r.json["badRequest"]["message"], context
            seen_400 += 1
            continue
        got = [s["id"] for s in r.json["servers"]]
        assert got == want_ids, context
        links = r.json.get("servers_links")
        assert bool(links) == want_link, context
        if links:
            assert f"marker={got[-1]}" in links[0]["href"], context
            seen_links += 1
        seen_pages += bool(got)
    # the random queries reached every outcome many times
    assert seen_pages > 100 and seen_400 > 20 and seen_links > 20, (seen_pages, seen_400, seen_links)


def test_following_next_links_walks_the_whole_listing_once(listing_plane, api_engine):
    client, engines, _ = listing_plane
    rng = random.Random(7)
    servers = _servers(rng, 60)
    _write(api_engine, engines, servers)
    for query in ([], [("sort_key", "display_name"), ("sort_dir", "asc")], [("sort_key", "host")],
                  [("sort_key", "launched_at"), ("sort_dir", "asc"), ("name", "a")]):
        want = reference(servers, [*query, ("all_tenants", "1")], project="admin", admin=True, version=90)[1]
        path = "/v2.1/servers/detail?" + urlencode([*query, ("all_tenants", "1"), ("limit", "7")])
        got = []
        while path:
            r = client.simulate_get(path.split("?")[0], query_string=path.split("?", 1)[1],
                                    headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.90"})
            assert r.status_code == 200, r.text
            got += [s["id"] for s in r.json["servers"]]
            links = r.json.get("servers_links")
            path = links[0]["href"][links[0]["href"].index("/v2.1/"):] if links else None
        assert got == want, query


def _walk(client, query: list[tuple[str, str]], version: int, limit: int = 7) -> list[str]:
    """Every id of a listing, page by page through its next links."""
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": f"compute 2.{version}"}
    path, got = "/v2.1/servers/detail?" + urlencode([*query, ("limit", str(limit))]), []
    while path:
        r = client.simulate_get(path.split("?")[0], query_string=path.split("?", 1)[1], headers=headers)
        assert r.status_code == 200, r.text
        got += [s["id"] for s in r.json["servers"]]
        links = r.json.get("servers_links")
        path = links[0]["href"][links[0]["href"].index("/v2.1/"):] if links else None
    return got


def test_a_cell_that_is_down_is_paged_after_the_others(listing_plane, api_engine):
    """From 2.69 the servers of a cell that does not answer follow all the
    others, oldest first, and pages go through the boundary and through
    them; before 2.69, or with a filter only a cell could apply, they are
    left out and a marker among them is a 400."""
    from billeting.api.compute import partial
    from billeting.cells.health import HealthSettings
    from tests.api.compute.test_cell_down import cut

    client, engines, catalog = listing_plane
    catalog.health.settings = HealthSettings(timeout_s=1.0, skip_s=0.2)
    rng = random.Random(3)
    servers = _servers(rng, 50)
    _write(api_engine, engines, servers)
    everyone = [("all_tenants", "1")]
    up = [s for s in servers if s.cell != "cell2"]
    known = partial.known(api_engine, [s.uuid for s in servers if s.cell == "cell2"])
    down = sorted(known, key=lambda u: (views.iso(known[u].created_at), u))
    assert len(down) > 5
    restore = cut(catalog, "cell2")
    try:
        healthy = reference(up, everyone, project="admin", admin=True, version=90)[1]
        assert _walk(client, everyone, 69) == healthy + down
        assert _walk(client, everyone, 68) == healthy
        assert _walk(client, [*everyone, ("name", "a")], 69) == \
            reference(up, [*everyone, ("name", "a")], project="admin", admin=True, version=90)[1]
        headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.69"}
        r = client.simulate_get("/v2.1/servers", query_string=urlencode([*everyone, ("marker", down[2]),
                                                                          ("limit", "2")]), headers=headers)
        assert [s["id"] for s in r.json["servers"]] == down[3:5] and r.json["servers"][0]["status"] == "UNKNOWN"
        for query in ([("marker", down[2])], [("marker", down[2]), ("name", "a")]):
            r = client.simulate_get("/v2.1/servers", query_string=urlencode([*everyone, *query]),
                                    headers={**headers, "OpenStack-API-Version": "compute 2.68"}
                                    if len(query) == 1 else headers)
            assert r.status_code == 400 and "marker" in r.text, (query, r.text)
    finally:
        restore()
    # back once the cell answers again (probed after its short skip)
    wait_for(lambda: _walk(client, everyone, 69) == reference(servers, everyone, project="admin", admin=True,
                                                              version=90)[1], what="cell2 listed again")


def test_a_listed_body_is_the_body_the_server_shows_alone(listing_plane, api_engine):
    """A listing builds its bodies from the rows it merged (the columns its
    page read); ``GET /servers/{id}`` from the record read whole: the two
    agree for every server, in every state, build requests and cell0's
    included, before and after 2.47 (flavor ids) and for admins or not."""
    client, engines, _ = listing_plane
    rng = random.Random(11)
    servers = _servers(rng, 40)
    _write(api_engine, engines, servers)
    # a fault shown in ERROR and DELETED (the listing reads them per cell, the show its own)
    for s in servers:
        if s.cell and s.vm_state in ("error", "deleted", "active"):
            inst.add_fault(engines[s.cell], s.uuid, inst.Fault(code=rng.choice((500, 409)), message=f"m-{s.uuid}",
                                                               details="d"))
    for s in servers[::5]:  # locked, some with a reason
        if s.cell:
            run_write(engines[s.cell], lambda conn, s=s: conn.execute(ct.instances.update().where(
                ct.instances.c.uuid == s.uuid).values(locked_by="owner", locked_reason=s.name if s.az else None)))
    compared = 0
    for token, version, query in (("admin", 1, [("all_tenants", "1"), ("deleted", "true")]),
                                  ("admin", 1, [("all_tenants", "1")]),
                                  ("admin", 90, [("all_tenants", "1"), ("deleted", "true")]),
                                  ("admin", 90, [("all_tenants", "1"), ("sort_key", "host")]),
                                  ("alice:p1", 47, []), ("bob:p2", 73, [("name", "a")]), ("alice:p1", 91, [])):
        headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute 2.{version}"}
        listed = client.simulate_get("/v2.1/servers/detail", query_string=urlencode(query), headers=headers)
        assert listed.status_code == 200, listed.text
        for body in listed.json["servers"]:
            alone = client.simulate_get(f"/v2.1/servers/{body['id']}", headers=headers)
            if alone.status_code == 404:  # (a deleted server shows in listings only)
                assert body["status"] == "DELETED"
                continue
            assert alone.json["server"] == body, (token, version, body["id"])
            compared += 1
    assert compared > 40


def handed_over_after_the_first_read(monkeypatch, module, api_engine, engines, seed: int) -> tuple:
    """A server queued as a build request (project ``p-moving``) that the
    conductor hands to cell1 right after ``module``'s first read of cell1;
    returns it and a list that holds the cell once the hand-over happened."""
    queued = msgspec.structs.replace(_servers(random.Random(seed), 1)[0], cell=None, vm_state="building",
                                     task_state="scheduling", project_id="p-moving")
    _write(api_engine, engines, [queued])
    real, moved = module.read_cell, []

    def read_then_hand_over(deps, cell, read):
        answer = real(deps, cell, read)
        if cell == "cell1" and not moved:
            moved.append(cell)
            _write(api_engine, engines, [msgspec.structs.replace(queued, cell="cell1", vm_state="active",
                                                                 task_state=None)], api_rows=False)
        return answer

    monkeypatch.setattr(module, "read_cell", read_then_hand_over)
    return queued, moved


def test_a_server_handed_to_its_cell_between_the_cells_reads_is_listed_once(listing_plane, api_engine, monkeypatch):
    """A listing asks a cell which queued servers it holds, then reads the
    cell's page: a server handed over between the two is in the page and
    must not be listed a second time from its build request."""
    from billeting.api.compute import server_listing

    client, engines, _ = listing_plane
    queued, moved = handed_over_after_the_first_read(monkeypatch, server_listing, api_engine, engines, 11)
    r = client.simulate_get("/v2.1/servers", query_string="all_tenants=1&project_id=p-moving",
                            headers={"X-Auth-Token": "admin"})
    assert r.status_code == 200, r.text
    assert moved and [s["id"] for s in r.json["servers"]] == [queued.uuid]
