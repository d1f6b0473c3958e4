"""Hosts named by an operator → the root providers Placement knows them by."""
from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable

from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.scheduler.catalog import SHARING_TRAIT
from billeting.scheduler.errors import UNKNOWN_HOST, InvalidRequest, PlacementTrouble


def _is_uuid(text: str) -> bool:
    try:
        return str(uuidlib.UUID(text)) == text.lower()
    except ValueError:
        return False


def hosts(client: PlacementClient, names: Iterable[str]) -> dict[str, str]:
    """Provider uuid -> name for each host, given by name or by uuid.
    Unknown names, nested providers and sharing providers are refused."""
    found: dict[str, str] = {}
    unknown: list[str] = []
    try:
        for name in dict.fromkeys(names):
            if _is_uuid(name):
                record = client.get_provider(name.lower())
                providers = [record] if record is not None else []
            else:
                providers = client.list_providers(name=name)
            if not providers:
                unknown.append(name)
                continue
            p = providers[0]
            if (p.root_provider_uuid or p.uuid) != p.uuid:
                raise InvalidRequest(f"{name} is a nested resource provider, not a host: name its root provider "
                                 f"({p.root_provider_uuid})", code=UNKNOWN_HOST)
            found[p.uuid] = p.name
        if unknown:
            raise InvalidRequest(f"unknown host{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: no resource "
                             "provider of that name or uuid in Placement", code=UNKNOWN_HOST)
        if found:
            sharing = {p.uuid for p in client.list_providers(required=[SHARING_TRAIT])} & set(found)
            if sharing:
                raise InvalidRequest(f"{', '.join(sorted(found[u] for u in sharing))}: sharing providers are not "
                                 "hosts (putting one in a domain's aggregate would share it with the domain)",
                                 code=UNKNOWN_HOST)
    except PlacementError as exc:
        raise PlacementTrouble(f"cannot look the hosts up in Placement: {exc.detail or exc}") from None
    return found
