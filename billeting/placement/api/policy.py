"""Authorization with oslo.policy and the Placement default rules (docs/design/placement-http.md#policy).

New (secure RBAC) defaults unless ``legacy`` is set, in which case each base
rule also accepts its deprecated alternative ``role:admin``. An operator
policy file (YAML or JSON) overrides rules by name.
"""
from __future__ import annotations

import logging

from oslo_policy import policy as oslo_policy

from billeting.common.policy import PolicyFileError, RuleEnforcer, scope_is_configurable
from billeting.common.http.context import RequestContext
from billeting.common.http.errors import HTTPProblem

__all__ = ["Authorizer", "PolicyFileError", "describe", "scope_is_configurable", "OPERATION_RULES"]

LOG = logging.getLogger(__name__)

ADMIN = "role:admin"
_DEPRECATION_REASON = "Placement moved to the admin, service and project-reader personas."

BASE_RULES = [
    ("admin_api", "role:admin"),
    ("service_api", "role:service"),
    ("admin_or_service_api", "role:admin or role:service"),
    ("project_reader_api", "role:reader and project_id:%(project_id)s"),
    ("admin_or_project_reader_or_service_api",
     "role:admin or rule:project_reader_api or role:service"),
]

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


def _defaults(operations=OPERATION_RULES) -> list[oslo_policy.RuleDefault]:
    rules: list[oslo_policy.RuleDefault] = []
    for name, check in BASE_RULES:
        deprecated = oslo_policy.DeprecatedRule(
            name=name, check_str=ADMIN, deprecated_reason=_DEPRECATION_REASON,
            deprecated_since="1.0")
        rules.append(oslo_policy.RuleDefault(
            name, check, description=f"Base rule {name}.", deprecated_rule=deprecated,
            scope_types=["project"]))
    for name, check, method, path in operations:
        rules.append(oslo_policy.DocumentedRuleDefault(
            name, check, description=f"{method} {path}",
            operations=[{"method": method, "path": path}], scope_types=["project"]))
    return rules


def describe(*, legacy: bool, enforce_scope: bool = True) -> str:
    """One line for the start-up log: which defaults are in force."""
    if legacy:
        rules = ("legacy policy defaults in force (enforce_new_defaults = False): every base "
                 "rule also accepts its deprecated alternative role:admin")
    else:
        rules = "new policy defaults in force (enforce_new_defaults = True): admin, service and project reader"
    if enforce_scope:
        scope = "system-scoped tokens refused"
    elif scope_is_configurable():
        scope = "scope not enforced (enforce_scope = False)"
    else:
        scope = ("system-scoped tokens refused (enforce_scope = False has no effect: this "
                 "oslo.policy always enforces scope)")
    return f"{rules}; {scope}"


class Authorizer(RuleEnforcer):
    """Placement's rules (or, with ``operations``, another service's on
    Placement's base rules) for a request context."""

    def __init__(self, *, policy_file: str | None = None, legacy: bool = False,
                 enforce_scope: bool = True, operations: list[tuple[str, str, str, str]] | None = None) -> None:
        """``operations`` (name, check, method, path) replace Placement's own
        rules: another service (the scheduler API) shares the base rules."""
        operations = operations or OPERATION_RULES
        super().__init__(lambda: _defaults(operations), policy_file=policy_file, legacy=legacy,
                         enforce_scope=enforce_scope, log=LOG)

    def allowed(self, ctx: RequestContext, rule: str, target: dict | None = None) -> bool:
        target = target if target is not None else {
            "project_id": ctx.project_id, "user_id": ctx.user_id}
        return self.check(ctx.policy_creds(), rule, target)

    def authorize(self, ctx: RequestContext, rule: str, target: dict | None = None) -> None:
        if not self.allowed(ctx, rule, target):
            raise HTTPProblem(403, f"Policy does not allow {rule} to be performed.")
