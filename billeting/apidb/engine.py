"""Engines for the API database: Placement's engine settings, its own default file."""
from __future__ import annotations

from pathlib import Path

import platformdirs

from billeting.placement.store.engine import make_engine, normalize_url

__all__ = ["default_url", "make_engine", "normalize_url"]


def default_url() -> str:
    """The embedded SQLite file beside Placement's, in the per-user data directory."""
    data_dir = Path(platformdirs.user_data_dir("billeting"))
    data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data_dir / 'scheduler.sqlite'}"
