"""Who is asking: the identity every handler authorizes against."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_GLOBAL_ID = re.compile(r"^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$")


@dataclass(slots=True)
class RequestContext:
    request_id: str
    user_id: str | None = None
    project_id: str | None = None
    roles: list[str] = field(default_factory=list)
    system_scope: str | None = None
    domain_id: str | None = None
    service_roles: list[str] = field(default_factory=list)
    global_request_id: str | None = None

    def policy_creds(self) -> dict:
        return {
            "user_id": self.user_id,
            "project_id": self.project_id,
            "roles": self.roles,
            "system_scope": self.system_scope,
            "domain_id": self.domain_id,
            "service_roles": self.service_roles,
        }


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def context_from_environ(environ: dict, request_id: str) -> RequestContext:
    """Build the context from the identity headers the auth layer set."""
    global_id = environ.get("HTTP_X_OPENSTACK_REQUEST_ID")
    return RequestContext(
        request_id=request_id,
        user_id=environ.get("HTTP_X_USER_ID") or None,
        project_id=environ.get("HTTP_X_PROJECT_ID") or None,
        roles=_split(environ.get("HTTP_X_ROLES")),
        system_scope=environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE") or None,
        domain_id=environ.get("HTTP_X_DOMAIN_ID") or None,
        service_roles=_split(environ.get("HTTP_X_SERVICE_ROLES")),
        global_request_id=global_id if global_id and _GLOBAL_ID.match(global_id) else None,
    )

