"""Base class of every HTTP resource."""
from __future__ import annotations


class Resource:
    """One route. ``METHODS`` lists what it answers, in ``Allow`` header order;
    anything else is a 405 (OPTIONS and HEAD included)."""

    METHODS: tuple[str, ...] = ()

    def __init__(self, deps) -> None:
        self.deps = deps
        self.engine = deps.engine
        self.settings = deps.settings
