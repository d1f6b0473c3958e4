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
from billeting.common.policy import RuleEnforcer
from billeting.conductor.move_protocols import MoveTasks


@dataclasses.dataclass(frozen=True)
class RequestContext:
    user_id: str
    project_id: str
    is_admin: bool   # the context_is_admin rule's answer, as Nova's context has it
    version: Version
    request_id: str
    roles: frozenset[str] = frozenset()
    enforcer: RuleEnforcer | None = None

    def can(self, rule: str, target_project: str | None = None) -> bool:
        """Whether the policy allows ``rule`` on something of ``target_project``
        (the caller's own project when None)."""
        if self.enforcer is None:  # (the anonymous root documents ask nothing)
            return False
        creds = {"user_id": self.user_id, "project_id": self.project_id, "roles": sorted(self.roles),
                 "system_scope": None, "domain_id": None, "service_roles": []}
        target = {"project_id": target_project or self.project_id, "user_id": self.user_id}
        return self.enforcer.check(creds, rule, target)

    def authorize(self, rule: str, target_project: str | None = None) -> None:
        """403 in Nova's words unless the policy allows ``rule``."""
        if not self.can(rule, target_project):
            raise forbidden(f"Policy doesn't allow {rule} to be performed.")


def new_request_id() -> str:
    return f"req-{uuid.uuid4()}"


@dataclasses.dataclass
class ComputeAPIDeps:
    """Everything the handlers use. ``cast_build`` hands a ``BuildPlan`` to the
    super conductor (a cast on the API bus, or a thread in tests);
    ``scheduler`` is a ``SchedulerService`` (server groups live there);
    ``moves`` is None when no move tasks are wired (actions answer 409);
    ``lifecycle`` the same for stop/start/shelve/rebuild/lock
    (``billeting.conductor.lifecycle.LifecycleTasks``)."""

    api_engine: Engine
    cells: CellCatalog
    scheduler: Any
    cast_build: Callable[[Any], None]
    moves: MoveTasks | None = None
    lifecycle: Any = None
    # Called after a compute service is enabled or disabled (the scheduler's
    # catalog forgets its cached host records).
    on_service_change: Callable[[], None] = lambda: None
    service_down_time_s: float = 60.0
    # The policy (billeting.api.compute.policy); None: the default rules.
    enforcer: RuleEnforcer | None = None
