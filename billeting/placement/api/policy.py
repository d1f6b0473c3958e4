"""Authorization with oslo.policy and the Placement default rules (spec 2.12).

New (secure RBAC) defaults unless ``legacy`` is set, in which case each base
rule also accepts its deprecated alternative ``role:admin``. An operator
policy file (YAML or JSON) overrides rules by name.
"""
from __future__ import annotations

import os

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo_policy

from billeting.placement.api.context import RequestContext
from billeting.placement.api.errors import HTTPProblem

ADMIN = "role:admin"
_MAX_CACHED_DECISIONS = 10_000
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
]


def _defaults() -> list[oslo_policy.RuleDefault]:
    rules: list[oslo_policy.RuleDefault] = []
    for name, check in BASE_RULES:
        deprecated = oslo_policy.DeprecatedRule(
            name=name, check_str=ADMIN, deprecated_reason=_DEPRECATION_REASON,
            deprecated_since="1.0")
        rules.append(oslo_policy.RuleDefault(
            name, check, description=f"Base rule {name}.", deprecated_rule=deprecated,
            scope_types=["project"]))
    for name, check, method, path in OPERATION_RULES:
        rules.append(oslo_policy.DocumentedRuleDefault(
            name, check, description=f"{method} {path}",
            operations=[{"method": method, "path": path}], scope_types=["project"]))
    return rules


class Authorizer:
    """Evaluates a named rule for a request context."""

    def __init__(self, *, policy_file: str | None = None, legacy: bool = False) -> None:
        conf = cfg.ConfigOpts()
        conf([], project="billeting", default_config_files=[])
        policy_opts.set_defaults(conf, enforce_scope=True, enforce_new_defaults=not legacy)
        if policy_file:
            conf.set_override("policy_file", policy_file, group="oslo_policy")
        # use_conf must be on: oslo.policy only merges the registered defaults into
        # its rule set while loading from configuration.
        self._enforcer = oslo_policy.Enforcer(conf, policy_file=policy_file, use_conf=True)
        self._enforcer.register_defaults(_defaults())
        self._enforcer.load_rules()
        self._policy_file = policy_file
        self._policy_stamp = self._file_stamp()
        # oslo.policy spends ~300 µs per check (file look-ups, argspec
        # introspection); a decision depends only on the rule, the
        # credentials and the target, so identical questions are answered
        # from here until the policy file changes.
        self._decisions: dict[tuple, bool] = {}

    def _file_stamp(self) -> tuple[int, int] | None:
        if not self._policy_file:
            return None
        try:
            info = os.stat(self._policy_file)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def allowed(self, ctx: RequestContext, rule: str, target: dict | None = None) -> bool:
        target = target if target is not None else {
            "project_id": ctx.project_id, "user_id": ctx.user_id}
        if self._policy_file:
            stamp = self._file_stamp()
            if stamp != self._policy_stamp:
                self._policy_stamp = stamp
                self._decisions.clear()
        key = (rule, tuple(sorted(ctx.roles)), ctx.project_id, ctx.user_id, ctx.system_scope,
               ctx.domain_id, tuple(sorted(ctx.service_roles)), tuple(sorted(target.items())))
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._evaluate(ctx, rule, target)
            if len(self._decisions) >= _MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _evaluate(self, ctx: RequestContext, rule: str, target: dict) -> bool:
        try:
            return bool(self._enforcer.authorize(rule, target, ctx.policy_creds(), do_raise=False))
        except oslo_policy.InvalidScope:
            return False

    def authorize(self, ctx: RequestContext, rule: str, target: dict | None = None) -> None:
        if not self.allowed(ctx, rule, target):
            raise HTTPProblem(403, f"Policy does not allow {rule} to be performed.")
