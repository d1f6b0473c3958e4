"""Who is asking (noauth2-style headers) and what the app runs on."""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from billeting.api.compute.errors import forbidden
from billeting.api.compute.microversion import Version
from billeting.apidb.cell_directory import CellCatalog
from billeting.conductor.move_protocols import MoveTasks


@dataclasses.dataclass(frozen=True)
class RequestContext:
    user_id: str
    project_id: str
    is_admin: bool
    version: Version
    request_id: str

    def require_admin(self) -> None:
        if not self.is_admin:
            raise forbidden()


def new_request_id() -> str:
    return f"req-{uuid.uuid4()}"


@dataclasses.dataclass
class ComputeAPIDeps:
    """Everything the handlers use. ``cast_build`` hands a ``BuildPlan`` to the
    super conductor (a cast on the API bus, or a thread in tests);
    ``scheduler`` is a ``SchedulerService`` (server groups live there);
    ``moves`` is None when no move tasks are wired (actions answer 409)."""

    api_engine: Engine
    cells: CellCatalog
    scheduler: Any
    cast_build: Callable[[Any], None]
    moves: MoveTasks | None = None
    # Called after a compute service is enabled or disabled (the scheduler's
    # catalog forgets its cached host records).
    on_service_change: Callable[[], None] = lambda: None
    service_down_time_s: float = 60.0
