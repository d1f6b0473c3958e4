"""Host records for the control plane's scheduler, read from the cell databases.

Each cell's services and compute nodes say whether a host is enabled and
up, how many builds failed on it and how many instances it runs
(``cells.hosts.host_reports``); they are laid over what the API database's
host-report table says (operators' overrides) and over Placement's view
(``PlacementHostCatalog``), which re-reads them every refresh. Hosts seen
for the first time are mapped to their cell in the API database, as
``nova-manage cell_v2 discover_hosts`` would, but automatically.

A cell whose database does not answer (``CellCatalog.read``) is skipped
rather than failing the refresh: its hosts keep the records last read,
marked down, so no build is sent there; the cell is logged once when it
goes down and once when it is back, and each skipped refresh is counted
(``billeting_scheduler_cells_skipped_total``). ``refresh_on_recovery``
has a catalog read its host records again as soon as a cell is back.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

import msgspec
from sqlalchemy import Engine

from billeting.apidb import cell_mappings
from billeting.apidb.cell_directory import CellCatalog
from billeting.cells.health import CellHealth, CellUnavailable
from billeting.cells.health_metrics import observe_cell_skipped
from billeting.cells.hosts import host_reports, merged
from billeting.cells.services import DEFAULT_DOWN_TIME_S
from billeting.scheduler.catalog import HostReport

LOG = logging.getLogger(__name__)


class CellHostReports:
    """A ``reports`` callable for ``PlacementHostCatalog`` / ``SchedulerService``."""

    def __init__(self, api_engine: Engine, cells: CellCatalog, *,
                 base: Callable[[], Mapping[str, HostReport]] | None = None,
                 down_time_s: float = DEFAULT_DOWN_TIME_S) -> None:
        self.api_engine = api_engine
        self.cells = cells
        self.base = base
        self.down_time_s = down_time_s
        self._mapped: set[str] = set()
        self._lock = threading.Lock()
        # Each cell's reports as last read: what its hosts look like (down) while it does not answer.
        self._last: dict[str, dict[str, HostReport]] = {}

    def __call__(self) -> dict[str, HostReport]:
        from_cells = merged(self._cell(name, h.engine) for name, h in self.cells.cells().items())
        self._discover(from_cells)
        found = dict(self.base()) if self.base is not None else {}
        for node, report in from_cells.items():
            below = found.get(node)
            if below is None:
                found[node] = report
            else:
                # The operator's table wins where it says something; the cell fills the rest.
                found[node] = HostReport(**{f: getattr(below, f) if getattr(below, f) is not None
                                            else getattr(report, f) for f in HostReport.__struct_fields__})
        return found

    def _cell(self, name: str, engine: Engine) -> dict[str, HostReport]:
        try:
            reports = self.cells.read(name, lambda: host_reports(engine, cell=name, down_time_s=self.down_time_s))
        except CellUnavailable as exc:
            observe_cell_skipped(name)
            LOG.debug("host records of cell %s skipped: %s", name, exc.reason)
            last = self._last.get(name)
            if last is None:
                # Down since this process started: the API database's host
                # mappings name its hosts (a node named as its host, as most are).
                last = {host: HostReport(service_host=host, cell_uuid=name) for host, cell in
                        cell_mappings.host_cells(self.api_engine).items() if cell == name}
            return {node: msgspec.structs.replace(r, up=False) for node, r in last.items()}
        self._last[name] = reports
        return reports

    def _discover(self, reports: Mapping[str, HostReport]) -> None:
        """Map new hosts on a thread of its own: the reports are read while a
        server group's decision may hold the API database (SQLite: its write
        lock), so writing here would wait for ourselves."""
        new = {r.service_host: r.cell_uuid for r in reports.values()
               if r.service_host and r.cell_uuid and r.service_host not in self._mapped}
        if not new or not self._lock.acquire(blocking=False):
            return
        threading.Thread(target=self._map, args=(new,), name="discover-hosts", daemon=True).start()

    def _map(self, new: dict[str, str]) -> None:
        try:
            added = cell_mappings.map_hosts(self.api_engine, new)
            self._mapped.update(new)
            if added:
                LOG.info("mapped %d new compute host(s) to their cells", added)
        except Exception:  # noqa: BLE001 - tried again on the next refresh
            LOG.exception("could not map compute hosts to their cells")
        finally:
            self._lock.release()


def refresh_on_recovery(health: CellHealth, invalidate: Callable[[], None]) -> None:
    """Call ``invalidate`` (a host catalog's) whenever a cell answers again:
    the records read while it was down show its hosts down, and waiting for
    the periodic refresh would leave a build forced onto one of them without
    a valid host. On a thread of its own: the health guard calls listeners
    from within a read, which may be the catalog's own refresh (holding the
    catalog's lock)."""
    def changed(cell: str, up: bool, _reason: str) -> None:
        if up:
            threading.Thread(target=invalidate, name=f"catalog-invalidate-{cell}", daemon=True).start()
    health.on_change(changed)
