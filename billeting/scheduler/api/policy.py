"""Default policy rules of the scheduler API (oslo.policy, on the persona base
rules of billeting.common.policy, as Placement's).

Everything defaults to ``admin`` or ``service``: the callers are operators
and other services (compute API, conductors, volume or batch services that
place work). Reading the topology and zones is open to readers too. A
``--policy-file`` overrides any rule by name, as for ``billeting serve``.
"""
from __future__ import annotations

import logging

from billeting.common.http.policy import Authorizer
from billeting.common.policy import persona_defaults

LOG = logging.getLogger(__name__)

_DEPRECATION_REASON = "The scheduler API uses the admin, service and reader personas."

ADMIN_OR_SERVICE = "rule:admin_or_service_api"
ADMIN = "rule:admin_api"
READER = "role:admin or role:service or role:reader"

RULES = [
    ("scheduler:selections:create", ADMIN_OR_SERVICE, "POST", "/selections"),
    ("scheduler:server_groups:create", ADMIN_OR_SERVICE, "POST", "/server_groups"),
    ("scheduler:server_groups:list", ADMIN_OR_SERVICE, "GET", "/server_groups"),
    ("scheduler:server_groups:show", ADMIN_OR_SERVICE, "GET", "/server_groups/{uuid}"),
    ("scheduler:server_groups:delete", ADMIN_OR_SERVICE, "DELETE", "/server_groups/{uuid}"),
    ("scheduler:topology:list", READER, "GET", "/topology"),
    ("scheduler:topology:show", READER, "GET", "/topology/{level}/{name}"),
    ("scheduler:topology:update", ADMIN, "PUT", "/topology/{level}/{name}"),
    ("scheduler:topology:delete", ADMIN, "DELETE", "/topology/{level}/{name}"),
    ("scheduler:availability_zones:list", READER, "GET", "/availability_zones"),
    ("scheduler:availability_zones:show", READER, "GET", "/availability_zones/{name}"),
    ("scheduler:availability_zones:update", ADMIN, "PUT", "/availability_zones/{name}"),
    ("scheduler:availability_zones:delete", ADMIN, "DELETE", "/availability_zones/{name}"),
    ("scheduler:aggregates:list", ADMIN_OR_SERVICE, "GET", "/aggregates"),
    ("scheduler:aggregates:show", ADMIN_OR_SERVICE, "GET", "/aggregates/{uuid}"),
    ("scheduler:aggregates:update", ADMIN, "PUT", "/aggregates/{uuid}"),
    ("scheduler:aggregates:delete", ADMIN, "DELETE", "/aggregates/{uuid}"),
    ("scheduler:hosts:list", ADMIN_OR_SERVICE, "GET", "/hosts"),
    ("scheduler:hosts:show", ADMIN_OR_SERVICE, "GET", "/hosts/{name}"),
    ("scheduler:hosts:update", ADMIN_OR_SERVICE, "PUT", "/hosts/{name}"),
    ("scheduler:hosts:delete", ADMIN_OR_SERVICE, "DELETE", "/hosts/{name}"),
]


def authorizer(*, policy_file: str | None = None, legacy: bool = False) -> Authorizer:
    return Authorizer(lambda: persona_defaults(RULES, deprecation_reason=_DEPRECATION_REASON),
                      policy_file=policy_file, legacy=legacy, log=LOG)
