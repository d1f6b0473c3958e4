"""Engines for the API database: Placement's engine settings, its own default file."""
from __future__ import annotations

from billeting.config import default_data_dir, ensure_default_data_dir
from billeting.common.db.engine import make_engine, normalize_url

__all__ = ["default_url", "make_engine", "normalize_url"]


def default_url(*, create: bool = True) -> str:
    """The embedded SQLite file beside Placement's, in the per-user data
    directory (created unless ``create`` is false: read-only commands)."""
    if create:
        ensure_default_data_dir()
    return f"sqlite:///{default_data_dir() / 'scheduler.sqlite'}"
