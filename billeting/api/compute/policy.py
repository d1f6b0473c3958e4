"""The compute API's default policy: Nova's rule names and secure-RBAC defaults.

Project-scoped personas: a ``reader`` of the project reads, a ``member``
acts, an ``admin`` administers (anywhere). An operator policy file
(``billeting compute-api serve --policy-file``) overrides any rule by name.
"""
from __future__ import annotations

import logging

from oslo_policy import policy as oslo_policy

from billeting.common.policy import RuleEnforcer

LOG = logging.getLogger(__name__)

ADMIN = "rule:context_is_admin"
READER = "rule:project_reader_or_admin"
MEMBER = "rule:project_member_or_admin"
ANYONE = "@"

BASE_RULES = [
    ("context_is_admin", "role:admin"),
    ("admin_api", "role:admin"),
    ("project_member_api", "role:member and project_id:%(project_id)s"),
    ("project_reader_api", "role:reader and project_id:%(project_id)s"),
    ("project_member_or_admin", "rule:project_member_api or rule:context_is_admin"),
    ("project_reader_or_admin", "rule:project_reader_api or rule:context_is_admin"),
]

_SRV = "/servers/{server_id}"
_ACT = f"{_SRV}/action"
_FL = "/flavors/{flavor_id}"
# (rule, default, method, path) — what each route asks, by Nova's names.
RULES = [
    ("os_compute_api:servers:index", READER, "GET", "/servers"),
    ("os_compute_api:servers:index:get_all_tenants", ADMIN, "GET", "/servers?all_tenants"),
    ("os_compute_api:servers:detail", READER, "GET", "/servers/detail"),
    ("os_compute_api:servers:detail:get_all_tenants", ADMIN, "GET", "/servers/detail?all_tenants"),
    ("os_compute_api:servers:allow_all_filters", ADMIN, "GET", "/servers?host,node"),
    ("os_compute_api:servers:show", READER, "GET", _SRV),
    ("os_compute_api:servers:create", MEMBER, "POST", "/servers"),
    ("os_compute_api:servers:create:forced_host", ADMIN, "POST", "/servers (availability_zone zone:host)"),
    ("compute:servers:create:requested_destination", ADMIN, "POST", "/servers (host, hypervisor_hostname)"),
    ("os_compute_api:servers:delete", MEMBER, "DELETE", _SRV),
    ("os_compute_api:servers:resize", MEMBER, "POST", f"{_ACT} (resize)"),
    ("os_compute_api:servers:confirm_resize", MEMBER, "POST", f"{_ACT} (confirmResize)"),
    ("os_compute_api:servers:revert_resize", MEMBER, "POST", f"{_ACT} (revertResize)"),
    ("os_compute_api:os-migrate-server:migrate", ADMIN, "POST", f"{_ACT} (migrate)"),
    ("os_compute_api:os-migrate-server:migrate_live", ADMIN, "POST", f"{_ACT} (os-migrateLive)"),
    ("os_compute_api:os-evacuate", ADMIN, "POST", f"{_ACT} (evacuate)"),
    ("os_compute_api:servers:stop", MEMBER, "POST", f"{_ACT} (os-stop)"),
    ("os_compute_api:servers:start", MEMBER, "POST", f"{_ACT} (os-start)"),
    ("os_compute_api:os-shelve:shelve", MEMBER, "POST", f"{_ACT} (shelve)"),
    ("os_compute_api:os-shelve:shelve_offload", ADMIN, "POST", f"{_ACT} (shelveOffload)"),
    ("os_compute_api:os-shelve:unshelve", MEMBER, "POST", f"{_ACT} (unshelve)"),
    ("os_compute_api:os-shelve:unshelve_to_host", ADMIN, "POST", f"{_ACT} (unshelve, host)"),
    ("os_compute_api:servers:rebuild", MEMBER, "POST", f"{_ACT} (rebuild)"),
    ("os_compute_api:os-lock-server:lock", MEMBER, "POST", f"{_ACT} (lock)"),
    ("os_compute_api:os-lock-server:unlock", MEMBER, "POST", f"{_ACT} (unlock)"),
    ("os_compute_api:os-lock-server:unlock:unlock_override", ADMIN, "POST", f"{_ACT} (unlock, an admin's lock)"),
    ("os_compute_api:os-instance-actions:list", READER, "GET", f"{_SRV}/os-instance-actions"),
    ("os_compute_api:os-instance-actions:show", READER, "GET", f"{_SRV}/os-instance-actions/{{request_id}}"),
    ("os_compute_api:servers:migrations:index", ADMIN, "GET", f"{_SRV}/migrations"),
    ("os_compute_api:servers:migrations:show", ADMIN, "GET", f"{_SRV}/migrations/{{migration_id}}"),
    ("os_compute_api:os-migrations:index", ADMIN, "GET", "/os-migrations"),
    ("os_compute_api:os-flavor-manage:create", ADMIN, "POST", "/flavors"),
    ("os_compute_api:os-flavor-manage:delete", ADMIN, "DELETE", _FL),
    ("os_compute_api:os-flavor-extra-specs:index", READER, "GET", f"{_FL}/os-extra_specs"),
    ("os_compute_api:os-flavor-extra-specs:show", READER, "GET", f"{_FL}/os-extra_specs/{{key}}"),
    ("os_compute_api:os-flavor-extra-specs:create", ADMIN, "POST", f"{_FL}/os-extra_specs"),
    ("os_compute_api:os-flavor-extra-specs:update", ADMIN, "PUT", f"{_FL}/os-extra_specs/{{key}}"),
    ("os_compute_api:os-flavor-extra-specs:delete", ADMIN, "DELETE", f"{_FL}/os-extra_specs/{{key}}"),
    ("os_compute_api:os-flavor-access", ADMIN, "GET", f"{_FL}/os-flavor-access"),
    ("os_compute_api:os-flavor-access:add_tenant_access", ADMIN, "POST", f"{_FL}/action (addTenantAccess)"),
    ("os_compute_api:os-flavor-access:remove_tenant_access", ADMIN, "POST",
     f"{_FL}/action (removeTenantAccess)"),
    ("os_compute_api:os-server-groups:index", READER, "GET", "/os-server-groups"),
    ("os_compute_api:os-server-groups:index:all_projects", ADMIN, "GET", "/os-server-groups?all_projects"),
    ("os_compute_api:os-server-groups:show", READER, "GET", "/os-server-groups/{server_group_id}"),
    ("os_compute_api:os-server-groups:create", MEMBER, "POST", "/os-server-groups"),
    ("os_compute_api:os-server-groups:delete", MEMBER, "DELETE", "/os-server-groups/{server_group_id}"),
    ("os_compute_api:limits", ANYONE, "GET", "/limits"),
    ("os_compute_api:limits:other_project", ADMIN, "GET", "/limits?tenant_id"),
    ("os_compute_api:os-aggregates:index", ADMIN, "GET", "/os-aggregates"),
    ("os_compute_api:os-aggregates:create", ADMIN, "POST", "/os-aggregates"),
    ("os_compute_api:os-aggregates:show", ADMIN, "GET", "/os-aggregates/{aggregate_id}"),
    ("os_compute_api:os-aggregates:update", ADMIN, "PUT", "/os-aggregates/{aggregate_id}"),
    ("os_compute_api:os-aggregates:delete", ADMIN, "DELETE", "/os-aggregates/{aggregate_id}"),
    ("os_compute_api:os-aggregates:add_host", ADMIN, "POST", "/os-aggregates/{aggregate_id}/action (add_host)"),
    ("os_compute_api:os-aggregates:remove_host", ADMIN, "POST",
     "/os-aggregates/{aggregate_id}/action (remove_host)"),
    ("os_compute_api:os-aggregates:set_metadata", ADMIN, "POST",
     "/os-aggregates/{aggregate_id}/action (set_metadata)"),
    ("os_compute_api:os-availability-zone:list", ANYONE, "GET", "/os-availability-zone"),
    ("os_compute_api:os-availability-zone:detail", ADMIN, "GET", "/os-availability-zone/detail"),
    ("os_compute_api:os-services:list", ADMIN, "GET", "/os-services"),
    ("os_compute_api:os-services:update", ADMIN, "PUT", "/os-services/{service_id}"),
    ("os_compute_api:os-services:delete", ADMIN, "DELETE", "/os-services/{service_id}"),
    ("os_compute_api:os-hypervisors:list", ADMIN, "GET", "/os-hypervisors"),
    ("os_compute_api:os-hypervisors:list-detail", ADMIN, "GET", "/os-hypervisors/detail"),
    ("os_compute_api:os-hypervisors:statistics", ADMIN, "GET", "/os-hypervisors/statistics"),
    ("os_compute_api:os-hypervisors:show", ADMIN, "GET", "/os-hypervisors/{hypervisor_id}"),
]


def defaults() -> list[oslo_policy.RuleDefault]:
    rules: list[oslo_policy.RuleDefault] = []
    for name, check in BASE_RULES:
        rules.append(oslo_policy.RuleDefault(name, check, description=f"Base rule {name}."))
    for name, check, method, path in RULES:
        rules.append(oslo_policy.DocumentedRuleDefault(
            name, check, description=f"{method} {path}", operations=[{"method": method, "path": path}],
            scope_types=["project"]))
    return rules


def enforcer(*, policy_file: str | None = None) -> RuleEnforcer:
    """Raises ``PolicyFileError`` when the file cannot be read or parsed."""
    return RuleEnforcer(defaults, policy_file=policy_file, log=LOG)
