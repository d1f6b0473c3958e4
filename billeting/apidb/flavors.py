"""Flavors and their extra specs in the API database."""
from __future__ import annotations

import datetime as dt

import msgspec
from sqlalchemy import Connection, Engine, delete, exists, insert, or_, select
from sqlalchemy.exc import IntegrityError

from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.nova import Flavor


# A server carries its flavor, extra specs and all, as JSON in TEXT columns
# (its build request, request spec, instance record), which hold 64 KiB on
# MySQL/MariaDB; the extra specs' share is bounded so one fits on every backend.
MAX_SPECS_JSON = 16384


class SpecsTooLarge(Exception):
    pass


class StoredFlavor(msgspec.Struct, frozen=True, kw_only=True):
    flavorid: str
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int
    ephemeral_gb: int
    swap: int
    rxtx_factor: float
    description: str | None
    is_public: bool
    disabled: bool
    extra_specs: dict[str, str]
    created_at: dt.datetime | None = None
    id: int = 0    # the row id (os-migrations' old/new_instance_type_id)

    def scheduler_flavor(self) -> Flavor:
        """What the scheduler and the cells carry."""
        return Flavor(vcpus=self.vcpus, memory_mb=self.memory_mb, root_gb=self.root_gb,
                      ephemeral_gb=self.ephemeral_gb, swap=self.swap, name=self.name,
                      extra_specs=dict(self.extra_specs))


class FlavorExists(Exception):
    pass


def _specs(conn: Connection, ids: list[int]) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    if ids:
        c = t.flavor_extra_specs.c
        for fid, key, value in conn.execute(select(c.flavor_id, c.key, c.value).where(c.flavor_id.in_(ids))):
            found.setdefault(fid, {})[key] = value
    return found


def _flavor(row, specs: dict[str, str]) -> StoredFlavor:
    return StoredFlavor(flavorid=row.flavorid, name=row.name, vcpus=row.vcpus, memory_mb=row.memory_mb,
                        root_gb=row.root_gb, ephemeral_gb=row.ephemeral_gb, swap=row.swap,
                        rxtx_factor=float(row.rxtx_factor), description=row.description,
                        is_public=bool(row.is_public), disabled=bool(row.disabled), extra_specs=dict(specs),
                        created_at=row.created_at, id=row.id)


def create(engine: Engine, *, flavorid: str, name: str, vcpus: int, memory_mb: int, root_gb: int = 0,
           ephemeral_gb: int = 0, swap: int = 0, rxtx_factor: float = 1.0, description: str | None = None,
           is_public: bool = True, extra_specs: dict[str, str] | None = None) -> StoredFlavor:
    """Raises FlavorExists when the id or the name is taken."""
    now = utcnow()

    def work(conn: Connection) -> None:
        new_id = conn.execute(insert(t.flavors).values(
            flavorid=flavorid, name=name, vcpus=vcpus, memory_mb=memory_mb, root_gb=root_gb,
            ephemeral_gb=ephemeral_gb, swap=swap, rxtx_factor=float(rxtx_factor), description=description,
            is_public=is_public, disabled=False, created_at=now, updated_at=now)).inserted_primary_key[0]
        if extra_specs:
            conn.execute(insert(t.flavor_extra_specs), [
                {"flavor_id": new_id, "key": k, "value": v} for k, v in extra_specs.items()])

    try:
        run_write(engine, work)
    except IntegrityError:
        raise FlavorExists(f"Flavor with ID {flavorid} or name {name} already exists.") from None
    return get(engine, flavorid)  # type: ignore[return-value]


def get(engine: Engine, flavorid: str) -> StoredFlavor | None:
    def work(conn: Connection):
        row = conn.execute(select(t.flavors).where(t.flavors.c.flavorid == flavorid)).first()
        return None if row is None else _flavor(row, _specs(conn, [row.id]).get(row.id, {}))
    return run_read(engine, work)


def _open_to(project_id: str):
    """The flavor is public, or private and open to the project."""
    fp = t.flavor_projects.c
    return or_(t.flavors.c.is_public.is_(True),
               exists().where(fp.flavor_id == t.flavors.c.id, fp.project_id == project_id))


def get_for(engine: Engine, flavorid: str, project_id: str | None) -> StoredFlavor | None:
    """The flavor if the project may see it (``project_id`` None: anyone may,
    as for an admin); else None, as if it did not exist."""
    def work(conn: Connection):
        query = select(t.flavors).where(t.flavors.c.flavorid == flavorid)
        if project_id is not None:
            query = query.where(_open_to(project_id))
        row = conn.execute(query).first()
        return None if row is None else _flavor(row, _specs(conn, [row.id]).get(row.id, {}))
    return run_read(engine, work)


def listing(engine: Engine, *, is_public: bool | None = None, project_id: str | None = None) -> list[StoredFlavor]:
    """Nova's flavor filter: ``is_public`` None lists every flavor, False the
    private ones; True the public ones and, with ``project_id``, the private
    ones open to that project."""
    def work(conn: Connection):
        query = select(t.flavors).where(t.flavors.c.disabled.is_(False)).order_by(t.flavors.c.flavorid)
        if is_public is True:
            query = query.where(_open_to(project_id) if project_id is not None else t.flavors.c.is_public.is_(True))
        elif is_public is False:
            query = query.where(t.flavors.c.is_public.is_(False))
        rows = conn.execute(query).all()
        specs = _specs(conn, [r.id for r in rows])
        return [_flavor(r, specs.get(r.id, {})) for r in rows]
    return run_read(engine, work)


def delete_flavor(engine: Engine, flavorid: str) -> bool:
    def work(conn: Connection) -> bool:
        row = conn.execute(select(t.flavors.c.id).where(t.flavors.c.flavorid == flavorid)).first()
        if row is None:
            return False
        conn.execute(delete(t.flavor_extra_specs).where(t.flavor_extra_specs.c.flavor_id == row.id))
        conn.execute(delete(t.flavor_projects).where(t.flavor_projects.c.flavor_id == row.id))
        conn.execute(delete(t.flavors).where(t.flavors.c.id == row.id))
        return True
    return run_write(engine, work)


def set_extra_specs(engine: Engine, flavorid: str, specs: dict[str, str]) -> dict[str, str] | None:
    """Add or replace keys; None when the flavor does not exist. Returns every
    spec. ``SpecsTooLarge`` (nothing written) when they would exceed ``MAX_SPECS_JSON``."""
    def work(conn: Connection):
        row = conn.execute(select(t.flavors.c.id).where(t.flavors.c.flavorid == flavorid)).first()
        if row is None:
            return None
        c = t.flavor_extra_specs.c
        if specs:
            conn.execute(delete(t.flavor_extra_specs).where(c.flavor_id == row.id, c.key.in_(list(specs))))
            conn.execute(insert(t.flavor_extra_specs), [
                {"flavor_id": row.id, "key": k, "value": v} for k, v in specs.items()])
        merged = _specs(conn, [row.id]).get(row.id, {})
        if len(msgspec.json.encode(merged)) > MAX_SPECS_JSON:
            raise SpecsTooLarge(f"A flavor's extra specs take at most {MAX_SPECS_JSON} bytes as JSON.")
        return merged
    return run_write(engine, work)


def delete_extra_spec(engine: Engine, flavorid: str, key: str) -> bool | None:
    """None: no flavor; False: no such key."""
    def work(conn: Connection):
        row = conn.execute(select(t.flavors.c.id).where(t.flavors.c.flavorid == flavorid)).first()
        if row is None:
            return None
        c = t.flavor_extra_specs.c
        return conn.execute(delete(t.flavor_extra_specs).where(c.flavor_id == row.id, c.key == key)).rowcount > 0
    return run_write(engine, work)


# --- access to private flavors (os-flavor-access) ----------------------------

class AccessExists(Exception):
    pass


def access_list(engine: Engine, flavorid: str) -> list[str] | None:
    """The projects a flavor is open to, sorted; None when no such flavor."""
    def work(conn: Connection):
        row = conn.execute(select(t.flavors.c.id).where(t.flavors.c.flavorid == flavorid)).first()
        if row is None:
            return None
        c = t.flavor_projects.c
        return list(conn.execute(select(c.project_id).where(c.flavor_id == row.id).order_by(c.project_id)).scalars())
    return run_read(engine, work)


def add_access(engine: Engine, flavor_row_id: int, project_id: str) -> None:
    """Raises AccessExists when the project has it already."""
    now = utcnow()

    def work(conn: Connection) -> None:
        conn.execute(insert(t.flavor_projects).values(flavor_id=flavor_row_id, project_id=project_id,
                                                      created_at=now, updated_at=now))
    try:
        run_write(engine, work)
    except IntegrityError:
        raise AccessExists(project_id) from None


def remove_access(engine: Engine, flavor_row_id: int, project_id: str) -> bool:
    """False when the project had no access."""
    c = t.flavor_projects.c
    return run_write(engine, lambda conn: conn.execute(
        delete(t.flavor_projects).where(c.flavor_id == flavor_row_id, c.project_id == project_id)).rowcount > 0)
