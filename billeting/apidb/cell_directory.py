"""``CellCatalog``: every cell's database and bus as the API level holds them,
opened from the cell mappings, and the ``CellDirectory`` the move tasks read."""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

from sqlalchemy import Engine

from billeting.apidb import cell_mappings, instance_mappings
from billeting.apidb.cell_mappings import CELL0, CellMapping
from billeting.cells.health import CellHealth, is_unreachable
from billeting.cells.wiring import open_cell_database
from billeting.messaging import Bus
from billeting.placement.store.engine import make_engine

LOG = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds to wait for a cell database's connection: the API level reads its
# cells on every listing, and a cell that is down must not hold them long.
CELL_CONNECT_TIMEOUT_S = 3


@dataclasses.dataclass(frozen=True)
class CellHandle:
    """One cell as the API level sees it: its database and its bus."""

    name: str
    engine: Engine
    bus: Bus


class CellCatalog:
    """Handles of the cells (cell0 has a database and no bus). Built once per
    process from the cell mappings, or from handles the caller already
    opened (the all-in-one shares its cells' engines and buses)."""

    def __init__(self, api_engine: Engine, handles: Mapping[str, CellHandle], cell0: Engine | None,
                 health: CellHealth | None = None) -> None:
        self.api_engine = api_engine
        self._handles = dict(handles)
        self.cell0 = cell0
        # Which cells answer (see billeting.cells.health): every read of a
        # cell by the API level goes through ``read``.
        self.health = health or CellHealth()
        self._owned = False

    @classmethod
    def open(cls, api_engine: Engine, *, upgrade: bool = False, health: CellHealth | None = None) -> CellCatalog:
        """A cell whose database does not answer now is opened all the same
        (unchecked, marked down): the process serves the other cells and
        reaches that one once it is back."""
        health = health or CellHealth()
        handles: dict[str, CellHandle] = {}
        cell0: Engine | None = None
        for mapping in cell_mappings.listing(api_engine):
            url = with_connect_timeout(mapping.database_connection)
            try:
                engine = open_cell_database(url, upgrade=upgrade)
            except Exception as exc:
                if not is_unreachable(exc):
                    raise
                LOG.warning("cell %s: its database does not answer (%s); serving the other cells",
                            mapping.name, exc.__class__.__name__)
                engine = make_engine(url)
                health.mark_down(mapping.name, "it did not answer at start")
            if mapping.is_cell0:
                cell0 = engine
            elif mapping.transport_url:
                handles[mapping.name] = CellHandle(mapping.name, engine, Bus(mapping.transport_url))
        catalog = cls(api_engine, handles, cell0, health)
        catalog._owned = True
        return catalog

    # --- CellDirectory -------------------------------------------------------------

    def cells(self) -> Mapping[str, CellHandle]:
        return dict(self._handles)

    def cells_by_name(self) -> dict[str, CellHandle]:
        return {h.name: h for h in self._handles.values()}

    def cell_of(self, instance_uuid: str) -> str | None:
        found = instance_mappings.get(self.api_engine, instance_uuid)
        return found.cell if found is not None else None

    # --- for the API level -----------------------------------------------------------

    def read(self, cell: str, work: Callable[[], T], *, deadline: bool = True) -> T:
        """``work()`` (which uses ``cell``'s database) under the cell's health
        guard: raises ``billeting.cells.health.CellUnavailable`` quickly
        when the cell does not answer. ``deadline=False`` for writes."""
        return self.health.call(cell, work, deadline=deadline)

    def engine_of(self, cell: str) -> Engine | None:
        if cell == CELL0:
            return self.cell0
        handle = self._handles.get(cell)
        return handle.engine if handle is not None else None

    def bus_of(self, cell: str) -> Bus | None:
        handle = self._handles.get(cell)
        return handle.bus if handle is not None else None

    def all_engines(self) -> dict[str, Engine]:
        """Every cell database, cell0 included, by cell name."""
        found = {name: h.engine for name, h in self._handles.items()}
        if self.cell0 is not None:
            found[CELL0] = self.cell0
        return found

    def close(self) -> None:
        if not self._owned:
            return
        for handle in self._handles.values():
            handle.bus.close()
            handle.engine.dispose()
        if self.cell0 is not None:
            self.cell0.dispose()


def with_connect_timeout(url: str, seconds: int = CELL_CONNECT_TIMEOUT_S) -> str:
    """``url`` with a connection timeout unless it names one (PostgreSQL and
    MySQL/MariaDB; SQLite has no server to wait for)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite") or "connect_timeout" in parsed.query:
        return url
    return parsed.update_query_dict({"connect_timeout": str(seconds)}).render_as_string(hide_password=False)


__all__ = ["CellCatalog", "CellMapping"]
