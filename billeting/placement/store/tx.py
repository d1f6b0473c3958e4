"""Placement's transactions: ``billeting.common.db.tx``, with every retry
counted in Placement's metrics (``billeting_placement_transaction_retries``).

Placement's modules import from here; the other services import
``billeting.common.db.tx`` and count nothing of Placement's.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, Engine

from billeting.common.db import tx as _tx
from billeting.common.db.tx import Retry, RetriesExhausted, is_transient
from billeting.placement import metrics

__all__ = ["Retry", "RetriesExhausted", "is_transient", "run_read", "run_write"]

T = TypeVar("T")


class _Counted:
    def retried(self, *, write: bool, generation: bool) -> None:
        metrics.observe_retry(write=write, generation=generation)

    def exhausted(self, *, write: bool) -> None:
        metrics.observe_retries_exhausted(write=write)


_COUNTED = _Counted()


def run_write(engine: Engine, work: Callable[[Connection], T], *, retries: int = 10) -> T:
    return _tx.run_write(engine, work, retries=retries, observer=_COUNTED)


def run_read(engine: Engine, work: Callable[[Connection], T]) -> T:
    return _tx.run_read(engine, work, observer=_COUNTED)
