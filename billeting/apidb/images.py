"""The small image catalog: an opaque id → name, disk format (``qcow2``,
``raw``, ...) and properties (e.g. ``trait:HW_CPU_X86_AVX2=required``).
Images are out of Billeting's scope; this only gives ``imageRef``
something to resolve to."""
from __future__ import annotations

import msgspec
from sqlalchemy import Connection, Engine, insert, select, update

from billeting import typeinfo
from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.nova import Image

_enc = msgspec.json.Encoder().encode
_dec = typeinfo.decoder(dict[str, str]).decode


class CatalogImage(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    properties: dict[str, str]
    # Glance always has one; None here (an entry made without one) asks the
    # scheduler for no image type support.
    disk_format: str | None = None

    def scheduler_image(self) -> Image:
        return Image(id=self.id, disk_format=self.disk_format, properties=dict(self.properties))


def put(engine: Engine, image_id: str, *, name: str = "", properties: dict[str, str] | None = None,
        disk_format: str | None = None) -> CatalogImage:
    now = utcnow()
    props = _enc(properties or {}).decode()
    values = dict(name=name, properties=props, disk_format=disk_format, updated_at=now)

    def work(conn: Connection) -> None:
        if not conn.execute(update(t.images).where(t.images.c.id == image_id).values(**values)).rowcount:
            conn.execute(insert(t.images).values(id=image_id, created_at=now, **values))

    run_write(engine, work)
    return CatalogImage(id=image_id, name=name, properties=dict(properties or {}), disk_format=disk_format)


def _image(row) -> CatalogImage:
    return CatalogImage(id=row.id, name=row.name, properties=_dec(row.properties), disk_format=row.disk_format)


def get(engine: Engine, image_id: str) -> CatalogImage | None:
    row = run_read(engine, lambda conn: conn.execute(select(t.images).where(t.images.c.id == image_id)).first())
    return _image(row) if row is not None else None


def listing(engine: Engine) -> list[CatalogImage]:
    rows = run_read(engine, lambda conn: conn.execute(select(t.images).order_by(t.images.c.id)).all())
    return [_image(r) for r in rows]
