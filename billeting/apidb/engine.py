"""Engines for the API database: Placement's engine settings, its own default file."""
from __future__ import annotations

from pathlib import Path

import platformdirs

from billeting.placement.store.engine import make_engine, normalize_url

__all__ = ["default_url", "make_engine", "normalize_url"]


def default_url(*, create: bool = True) -> str:
    """The embedded SQLite file beside Placement's, in the per-user data
    directory (created unless ``create`` is false: read-only commands)."""
    data_dir = Path(platformdirs.user_data_dir("billeting"))
    if create:
        data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data_dir / 'scheduler.sqlite'}"
