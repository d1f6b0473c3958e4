"""The zone each compute service is in, and the zones a server may ask for
(``/os-availability-zone`` itself is served with the other service
listings, in ``services``).

Zones are the scheduler's (aggregates of nodes with ``availability_zone``
metadata, see ``billeting.scheduler.service.zones``), read from its host
catalog so that this API shows what the scheduler places by; a service host
is in the zone of its nodes, or the default zone when none is in one. As in
Nova, a zone is listed when some compute service is in it, and is available
when one of those is enabled; cell conductors are in the ``internal`` zone,
which only the admin's detailed listing shows.
"""
from __future__ import annotations

import logging

from billeting.api.compute.context import ComputeAPIDeps
from billeting.cells import services as svc
from billeting.placement_client.client import PlacementError
from billeting.scheduler.catalog import DEFAULT_ZONE

INTERNAL_ZONE = "internal"
LOG = logging.getLogger(__name__)


def host_zones(deps: ComputeAPIDeps, *, best_effort: bool = False) -> dict[str, str]:
    """Compute service host → its zone, as the scheduler places by it (its
    host catalog: zones defined through the scheduler and aggregates whose
    metadata names one alike), for hosts outside the default zone.
    ``best_effort``: without Placement, every host shows the default zone
    (os-services must work while Placement is down: that is when operators
    force computes down)."""
    catalog = deps.scheduler.catalog
    try:
        records = catalog.records(catalog.host_uuids())
    except PlacementError as exc:
        if not best_effort:
            raise
        LOG.warning("zones of compute hosts unknown (Placement: %s); showing the default zone", exc)
        return {}
    return {record.service_host: record.availability_zone for record in records.values()
            if record.availability_zone != DEFAULT_ZONE}


def zone_names(deps: ComputeAPIDeps) -> set[str]:
    """Every zone a server may ask for: the default one and every zone an
    aggregate's metadata names (hosts or not, as Nova's API takes them)."""
    return {DEFAULT_ZONE, deps.scheduler.settings.default_availability_zone, *deps.scheduler.directory.zones()}


def zone_of(record: svc.ServiceRecord, zones: dict[str, str]) -> str:
    if record.binary != svc.COMPUTE:
        return INTERNAL_ZONE
    return zones.get(record.host, DEFAULT_ZONE)
