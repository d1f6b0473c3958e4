"""The bodies the scheduler API answers with, as msgspec types: the views
the handlers encode, wrapped in the one-key objects the list calls and
``POST /selections`` send. The OpenAPI document derives its response
schemas from these (``msgspec.json.schema_components``), so a field added
to a view appears in the document without anyone writing it there."""
from __future__ import annotations

from typing import Annotated

import msgspec

from billeting.scheduler.core import RankedHost
from billeting.scheduler.explain import Explanation
from billeting.scheduler.selection import Selection
from billeting.scheduler.service.views import AggregateView, DomainView, GroupView, HostView, TopologyView, ZoneView


class SelectionList(msgspec.Struct, frozen=True):
    """``POST /selections`` (201): per instance, [chosen, alternate, …]; the chosen one claimed, its
    ``claims_lost`` counting the claims it lost to other schedulers first."""

    selections: list[list[Selection]]


class DryRun(msgspec.Struct, frozen=True):
    """``POST /selections`` with ``dry_run`` (200): the hosts ranked, best first, nothing claimed."""

    hosts: list[RankedHost]


class HostList(msgspec.Struct, frozen=True):
    hosts: list[HostView]


class ZoneList(msgspec.Struct, frozen=True):
    availability_zones: list[ZoneView]


class AggregateList(msgspec.Struct, frozen=True):
    aggregates: list[AggregateView]


class ServerGroupList(msgspec.Struct, frozen=True):
    server_groups: list[GroupView]


class Link(msgspec.Struct, frozen=True):
    rel: str
    href: str


class Version(msgspec.Struct, frozen=True):
    id: str
    min_version: str
    max_version: str
    status: str
    links: list[Link]


class VersionList(msgspec.Struct, frozen=True):
    """``GET /``."""

    versions: list[Version]


class ErrorItem(msgspec.Struct, frozen=True, kw_only=True):
    status: int
    title: str
    detail: str
    code: Annotated[str, msgspec.Meta(pattern=r"^billeting\.")]
    request_id: str | None = None
    # Only with billeting.no_valid_host: why no host was offered.
    explanation: Explanation | None = None


class Error(msgspec.Struct, frozen=True):
    """Every error of this API: Placement's error document, always with a ``code``."""

    errors: Annotated[list[ErrorItem], msgspec.Meta(min_length=1, max_length=1)]


# Answer bodies by name; the document refers to each as #/components/schemas/<name>.
RESPONSES = (SelectionList, DryRun, HostList, HostView, ZoneList, ZoneView, AggregateList, AggregateView,
             ServerGroupList, GroupView, TopologyView, DomainView, VersionList, Error)
