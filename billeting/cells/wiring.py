"""The only handles a cell's processes get: their cell database, their cell
bus, and Placement.

"A cell never calls up" is enforced here, by construction: a compute or a
cell conductor is built from a ``CellWiring`` and nothing else, and a
``CellWiring`` is made from a ``CellConfig`` — the cell's database URL and
its bus URL. There is no parameter through which an API database or the
API bus could be passed, so no code in a cell holds one; a message a cell
sends to the scheduler's topic lands in the cell's own messaging space,
where no scheduler listens.
"""
from __future__ import annotations

from dataclasses import dataclass

import msgspec
from sqlalchemy import Engine

from billeting.cells import migrate
from billeting.messaging import Bus
from billeting.common.db.engine import make_engine, normalize_url
from billeting.placement_client.client import PlacementClient

CELL0 = "cell0"


class CellConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A cell as the deployment knows it. The name is also what Selections
    and host records carry as the cell's identifier (``cell_uuid``)."""

    name: str
    database_url: str
    # None for cell0, which is a database only (instances that never got a host).
    transport_url: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a cell needs a name")
        if self.transport_url is None and self.name != CELL0:
            raise ValueError(f"cell {self.name} needs a transport URL (only {CELL0} has no bus)")


class CellSchemaError(Exception):
    """The cell database is missing its schema or is behind."""


@dataclass(frozen=True, slots=True)
class CellWiring:
    cell: CellConfig
    engine: Engine               # this cell's database, nothing else
    bus: Bus | None              # this cell's messaging space (None: cell0)
    placement: PlacementClient

    @property
    def name(self) -> str:
        return self.cell.name

    def require_bus(self) -> Bus:
        if self.bus is None:
            raise ValueError(f"cell {self.cell.name} has no bus; nothing runs in it")
        return self.bus

    def close(self) -> None:
        if self.bus is not None:
            self.bus.close()
        self.engine.dispose()


def open_cell_database(url: str, *, upgrade: bool = False, pool_size: int = 10) -> Engine:
    """An engine for a cell database whose schema is current (migrated first
    when ``upgrade``). Raises CellSchemaError otherwise."""
    engine = make_engine(url, pool_size=pool_size)
    try:
        if upgrade:
            migrate.upgrade(engine)
        else:
            current, head = migrate.current_revision(engine), migrate.head_revision()
            if current != head:
                state = "empty (no cell schema)" if current is None else f"at cell revision {current}"
                raise CellSchemaError(f"cell database is {state} but this Billeting needs revision {head}")
    except BaseException:
        engine.dispose()
        raise
    return engine


def wire_cell(cell: CellConfig, placement: PlacementClient, *, upgrade: bool = False,
              engine: Engine | None = None, bus: Bus | None = None) -> CellWiring:
    """Everything a process of ``cell`` may use. ``engine``/``bus`` let a
    process that runs several services of one cell share them; they must be
    the cell's own (checked by URL)."""
    if engine is None:
        engine = open_cell_database(cell.database_url, upgrade=upgrade)
    elif engine.url.render_as_string(hide_password=False) != normalize_url(cell.database_url):
        raise ValueError(f"the engine given for cell {cell.name} is not its database")
    if bus is None and cell.transport_url is not None:
        bus = Bus(cell.transport_url)
    elif bus is not None and bus.url != cell.transport_url:
        raise ValueError(f"the bus given for cell {cell.name} is not its messaging space")
    return CellWiring(cell=cell, engine=engine, bus=bus, placement=placement)
