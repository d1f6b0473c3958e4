"""Cell mappings (every cell, cell0 included) and host mappings (host → cell)."""
from __future__ import annotations

import uuid as uuidlib

import msgspec
from sqlalchemy import Connection, Engine, delete, insert, select, update

from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write

CELL0 = "cell0"


class CellMapping(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    uuid: str
    name: str
    database_connection: str
    transport_url: str | None
    disabled: bool = False

    @property
    def is_cell0(self) -> bool:
        return self.name == CELL0


def _cell(row) -> CellMapping:
    return CellMapping(id=row.id, uuid=row.uuid, name=row.name, database_connection=row.database_connection,
                       transport_url=row.transport_url, disabled=bool(row.disabled))


def ensure_cell(engine: Engine, *, name: str, database_connection: str, transport_url: str | None,
                uuid: str | None = None) -> CellMapping:
    """Create the mapping, or update the URLs of the one with that name."""
    now = utcnow()

    def work(conn: Connection) -> None:
        c = t.cell_mappings.c
        changed = conn.execute(update(t.cell_mappings).where(c.name == name).values(
            database_connection=database_connection, transport_url=transport_url, updated_at=now)).rowcount
        if not changed:
            conn.execute(insert(t.cell_mappings).values(
                uuid=uuid or str(uuidlib.uuid4()), name=name, database_connection=database_connection,
                transport_url=transport_url, disabled=False, created_at=now, updated_at=now))

    run_write(engine, work)
    return by_name(engine, name)  # type: ignore[return-value]


def listing(engine: Engine) -> list[CellMapping]:
    rows = run_read(engine, lambda conn: conn.execute(select(t.cell_mappings).order_by(t.cell_mappings.c.name)).all())
    return [_cell(r) for r in rows]


def by_name(engine: Engine, name: str) -> CellMapping | None:
    row = run_read(engine, lambda conn: conn.execute(
        select(t.cell_mappings).where(t.cell_mappings.c.name == name)).first())
    return _cell(row) if row is not None else None


# --- host mappings ------------------------------------------------------------------

def map_hosts(engine: Engine, hosts: dict[str, str]) -> int:
    """host → cell name; adds the hosts not mapped yet (like discover_hosts).
    Returns how many were added. A host never moves cell here."""
    if not hosts:
        return 0
    now = utcnow()

    def work(conn: Connection) -> int:
        ids = {r.name: r.id for r in conn.execute(select(t.cell_mappings.c.name, t.cell_mappings.c.id))}
        known = set(conn.execute(select(t.host_mappings.c.host).where(
            t.host_mappings.c.host.in_(list(hosts)))).scalars())
        rows = [{"host": h, "cell_id": ids[c], "created_at": now, "updated_at": now}
                for h, c in hosts.items() if h not in known and c in ids]
        if rows:
            conn.execute(insert(t.host_mappings), rows)
        return len(rows)

    return run_write(engine, work)


def host_cells(engine: Engine) -> dict[str, str]:
    """Every mapped host → its cell's name."""
    h, c = t.host_mappings.c, t.cell_mappings.c
    return dict(run_read(engine, lambda conn: conn.execute(select(h.host, c.name).join_from(
        t.host_mappings, t.cell_mappings, h.cell_id == c.id)).all()))


def cell_of_host(engine: Engine, host: str) -> str | None:
    h, c = t.host_mappings.c, t.cell_mappings.c
    return run_read(engine, lambda conn: conn.execute(select(c.name).join_from(
        t.host_mappings, t.cell_mappings, h.cell_id == c.id).where(h.host == host)).scalar())


def unmap_host(engine: Engine, host: str) -> None:
    """Forget a host's cell (its compute service was deleted)."""
    run_write(engine, lambda conn: conn.execute(delete(t.host_mappings).where(t.host_mappings.c.host == host)))

