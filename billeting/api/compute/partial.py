"""Servers of a cell that is down, as the API database alone knows them
(microversion 2.69 and later): the mapping (id, project, user, when it was
asked for) and the request spec (flavor, image, zone). Their status is
``UNKNOWN``; nothing a cell keeps (name, host, state, addresses) is shown."""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

from sqlalchemy import select

from billeting import typeinfo
from billeting.api.compute.microversion import Version
from billeting.api.compute.views import flavor_in_server, iso, link
from billeting.apidb import tables as t
from billeting.apidb.request_specs import StoredRequestSpec
from billeting.placement.store.tx import run_read

# The first microversion that lists a down cell's servers instead of leaving them out.
MICROVERSION = 69
UNKNOWN = "UNKNOWN"

decode_spec = typeinfo.decoder(StoredRequestSpec).decode


@dataclasses.dataclass(frozen=True)
class KnownServer:
    """What the API database holds about one server."""

    instance_uuid: str
    project_id: str
    user_id: str
    created_at: dt.datetime | None
    spec: StoredRequestSpec | None


def known(engine, instance_uuids: Iterable[str]) -> dict[str, KnownServer]:
    """The API database's facts about ``instance_uuids``, in one read."""
    wanted = list(instance_uuids)
    if not wanted:
        return {}
    m, s = t.instance_mappings.c, t.request_specs.c
    query = select(m.instance_uuid, m.project_id, m.user_id, m.created_at, s.spec).join_from(
        t.instance_mappings, t.request_specs, s.instance_uuid == m.instance_uuid, isouter=True).where(
        m.instance_uuid.in_(wanted))
    rows = run_read(engine, lambda conn: conn.execute(query).all())
    return {r.instance_uuid: KnownServer(instance_uuid=r.instance_uuid, project_id=r.project_id, user_id=r.user_id,
                                         created_at=r.created_at, spec=decode_spec(r.spec) if r.spec else None)
            for r in rows}


def index_body(uuid: str, base: str) -> dict:
    """An entry of ``GET /servers``."""
    return {"id": uuid, "status": UNKNOWN, "links": link(base, "servers", uuid)}


def detail_body(server: KnownServer, *, version: Version, base: str, flavorid: str | None = None) -> dict:
    """An entry of ``GET /servers/detail`` and the body of ``GET /servers/{id}``."""
    spec = server.spec
    body: dict = {"id": server.instance_uuid, "status": UNKNOWN, "tenant_id": server.project_id,
                  "user_id": server.user_id, "created": iso(server.created_at),
                  "links": link(base, "servers", server.instance_uuid), "OS-EXT-STS:power_state": 0}
    if spec is not None:
        body["flavor"] = flavor_in_server(spec.flavor, flavorid, version, base)
        body["image"] = ({"id": spec.image.id, "links": [{"rel": "bookmark",
                                                           "href": f"{base}/images/{spec.image.id}"}]}
                         if spec.image is not None else "")
        body["OS-EXT-AZ:availability_zone"] = spec.availability_zone or ""
        body["server_groups"] = [spec.server_group] if spec.server_group else []
    return body
