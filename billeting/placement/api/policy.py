"""Placement's default rules (docs/design/placement-http.md#policy), on the
persona base rules of billeting.common.policy.

New (secure RBAC) defaults unless ``legacy`` is set, in which case each base
rule also accepts its deprecated alternative ``role:admin``. An operator
policy file (YAML or JSON) overrides rules by name.
"""
from __future__ import annotations

import logging

from billeting.common.http import policy as http_policy
from billeting.common.policy import persona_defaults

LOG = logging.getLogger(__name__)

_DEPRECATION_REASON = "Placement moved to the admin, service and project-reader personas."

_ADMIN_OR_SERVICE = "rule:admin_or_service_api"

OPERATION_RULES = [
    ("placement:resource_providers:list", _ADMIN_OR_SERVICE, "GET", "/resource_providers"),
    ("placement:resource_providers:create", _ADMIN_OR_SERVICE, "POST", "/resource_providers"),
    ("placement:resource_providers:show", _ADMIN_OR_SERVICE, "GET", "/resource_providers/{uuid}"),
    ("placement:resource_providers:update", _ADMIN_OR_SERVICE, "PUT", "/resource_providers/{uuid}"),
    ("placement:resource_providers:delete", _ADMIN_OR_SERVICE, "DELETE", "/resource_providers/{uuid}"),
    ("placement:resource_classes:list", _ADMIN_OR_SERVICE, "GET", "/resource_classes"),
    ("placement:resource_classes:create", _ADMIN_OR_SERVICE, "POST", "/resource_classes"),
    ("placement:resource_classes:show", _ADMIN_OR_SERVICE, "GET", "/resource_classes/{name}"),
    ("placement:resource_classes:update", _ADMIN_OR_SERVICE, "PUT", "/resource_classes/{name}"),
    ("placement:resource_classes:delete", _ADMIN_OR_SERVICE, "DELETE", "/resource_classes/{name}"),
    ("placement:resource_providers:inventories:list", _ADMIN_OR_SERVICE, "GET",
     "/resource_providers/{uuid}/inventories"),
    ("placement:resource_providers:inventories:create", _ADMIN_OR_SERVICE, "POST",
     "/resource_providers/{uuid}/inventories"),
    ("placement:resource_providers:inventories:show", _ADMIN_OR_SERVICE, "GET",
     "/resource_providers/{uuid}/inventories/{resource_class}"),
    ("placement:resource_providers:inventories:update", _ADMIN_OR_SERVICE, "PUT",
     "/resource_providers/{uuid}/inventories"),
    ("placement:resource_providers:inventories:delete", _ADMIN_OR_SERVICE, "DELETE",
     "/resource_providers/{uuid}/inventories"),
    ("placement:resource_providers:aggregates:list", _ADMIN_OR_SERVICE, "GET",
     "/resource_providers/{uuid}/aggregates"),
    ("placement:resource_providers:aggregates:update", _ADMIN_OR_SERVICE, "PUT",
     "/resource_providers/{uuid}/aggregates"),
    ("placement:resource_providers:usages", _ADMIN_OR_SERVICE, "GET",
     "/resource_providers/{uuid}/usages"),
    ("placement:usages", "rule:admin_or_project_reader_or_service_api", "GET", "/usages"),
    ("placement:traits:list", _ADMIN_OR_SERVICE, "GET", "/traits"),
    ("placement:traits:show", _ADMIN_OR_SERVICE, "GET", "/traits/{name}"),
    ("placement:traits:update", _ADMIN_OR_SERVICE, "PUT", "/traits/{name}"),
    ("placement:traits:delete", _ADMIN_OR_SERVICE, "DELETE", "/traits/{name}"),
    ("placement:resource_providers:traits:list", _ADMIN_OR_SERVICE, "GET",
     "/resource_providers/{uuid}/traits"),
    ("placement:resource_providers:traits:update", _ADMIN_OR_SERVICE, "PUT",
     "/resource_providers/{uuid}/traits"),
    ("placement:resource_providers:traits:delete", _ADMIN_OR_SERVICE, "DELETE",
     "/resource_providers/{uuid}/traits"),
    ("placement:allocations:manage", _ADMIN_OR_SERVICE, "POST", "/allocations"),
    ("placement:allocations:list", _ADMIN_OR_SERVICE, "GET", "/allocations/{consumer_uuid}"),
    ("placement:allocations:update", _ADMIN_OR_SERVICE, "PUT", "/allocations/{consumer_uuid}"),
    ("placement:allocations:delete", _ADMIN_OR_SERVICE, "DELETE", "/allocations/{consumer_uuid}"),
    ("placement:resource_providers:allocations:list", _ADMIN_OR_SERVICE, "GET",
     "/resource_providers/{uuid}/allocations"),
    ("placement:allocation_candidates:list", _ADMIN_OR_SERVICE, "GET", "/allocation_candidates"),
    ("placement:reshaper:reshape", "rule:service_api", "POST", "/reshaper"),
    # Billeting's own: GET /metrics when serving with metrics_access = policy.
    ("billeting:metrics", _ADMIN_OR_SERVICE, "GET", "/metrics"),
]


class Authorizer(http_policy.Authorizer):
    """Placement's rules for a request context."""

    def __init__(self, *, policy_file: str | None = None, legacy: bool = False,
                 enforce_scope: bool = True) -> None:
        super().__init__(lambda: persona_defaults(OPERATION_RULES, deprecation_reason=_DEPRECATION_REASON),
                         policy_file=policy_file, legacy=legacy, enforce_scope=enforce_scope, log=LOG)
