"""The scheduler filters' base class and registry, shared by ``filters`` and
the modules of filters kept apart (``capability_filters``,
``aggregate_filters``: any module of the package named ``*_filters``), which
``filters`` finds and imports so they register.  It sits below all of them so
none has to import ``filters`` back.
"""
from __future__ import annotations

from typing import ClassVar

from billeting.scheduler.decision import Decision
from billeting.scheduler.hoststate import HostState

REGISTRY: dict[str, type["Filter"]] = {}


class Filter:
    name: ClassVar[str]
    cost: ClassVar[int]
    once_per_request: ClassVar[bool] = False
    # Run when configuration names no filters (``enabled_filters`` unset).
    default_on: ClassVar[bool] = True
    # How an explanation says why a host was removed: "<n> <explains>".
    explains: ClassVar[str]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # abstract helpers have no name and are not registered
            REGISTRY[cls.name] = cls

    def active(self, decision: Decision) -> bool:
        """False when this request gives the filter nothing to check (it is skipped)."""
        return True

    def passes(self, host: HostState, decision: Decision) -> bool:
        raise NotImplementedError

    def explained(self, decision: Decision) -> str:
        """``explains`` for this request (asked only when the filter removed hosts)."""
        return self.explains
