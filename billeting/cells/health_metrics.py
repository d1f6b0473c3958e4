"""Prometheus counter of cells the control plane's readers found down.

In prometheus_client's default registry of the process that reads the
cells (``billeting scheduler serve`` adds its workers' values up on
``GET /metrics``; the all-in-one serves them on the compute API's).
"""
from __future__ import annotations

from prometheus_client import REGISTRY, Counter

from billeting.serving import metrics as shared

_BUILT: list = []


def _build() -> None:
    global CELLS_SKIPPED
    for old in _BUILT:
        REGISTRY.unregister(old)
    _BUILT.clear()
    CELLS_SKIPPED = Counter(
        "billeting_scheduler_cells_skipped",
        "Refreshes of the scheduler's host records that skipped a cell whose database did not answer "
        "(its hosts are left out of scheduling until it answers), by cell.", ["cell"])
    _BUILT.append(CELLS_SKIPPED)


_build()
shared.on_rebuild(_build)


def observe_cell_skipped(cell: str) -> None:
    CELLS_SKIPPED.labels(cell).inc()
