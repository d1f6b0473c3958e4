"""``CellCatalog``: every cell's database and bus as the API level holds them,
opened from the cell mappings, and the ``CellDirectory`` the move tasks read."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from sqlalchemy import Engine

from billeting.apidb import cell_mappings, instance_mappings
from billeting.apidb.cell_mappings import CELL0, CellMapping
from billeting.cells.wiring import open_cell_database
from billeting.messaging import Bus


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

    def __init__(self, api_engine: Engine, handles: Mapping[str, CellHandle], cell0: Engine | None) -> None:
        self.api_engine = api_engine
        self._handles = dict(handles)
        self.cell0 = cell0
        self._owned = False

    @classmethod
    def open(cls, api_engine: Engine, *, upgrade: bool = False) -> CellCatalog:
        handles: dict[str, CellHandle] = {}
        cell0: Engine | None = None
        for mapping in cell_mappings.listing(api_engine):
            engine = open_cell_database(mapping.database_connection, upgrade=upgrade)
            if mapping.is_cell0:
                cell0 = engine
            elif mapping.transport_url:
                handles[mapping.name] = CellHandle(mapping.name, engine, Bus(mapping.transport_url))
        catalog = cls(api_engine, handles, cell0)
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


__all__ = ["CellCatalog", "CellMapping"]
