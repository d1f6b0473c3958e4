"""``SchedulerService``: one scheduler with everything it stands on.

    Placement client ──┐
    API database ──────┼─▶ SqlDirectory ─┐
                       └─▶ host reports ─┴▶ PlacementHostCatalog ─▶ Scheduler

Every front door (HTTP, RPC, the all-in-one) builds one per process and
calls ``select``/``dry_run``; the service operations (topology, zones,
groups, host reports) take it as their first argument.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from sqlalchemy import Engine

from billeting.apidb.directory import SqlDirectory
from billeting.apidb.host_reports import DOWN_AFTER_S, HostReportLoader
from billeting.placement_client.client import PlacementClient
from billeting.scheduler.catalog import HostReport, PlacementHostCatalog
from billeting.scheduler.core import RankedHost, Scheduler
from billeting.scheduler.inflight import InFlight, NotRecorded
from billeting.scheduler.request import ScheduleRequest
from billeting.scheduler.selection import Selection
from billeting.scheduler.service import groups
from billeting.scheduler.service.groups import GroupLock
from billeting.scheduler.settings import SchedulerSettings


class SchedulerService:
    def __init__(self, client: PlacementClient, engine: Engine, settings: SchedulerSettings | None = None, *,
                 down_after_s: float = DOWN_AFTER_S, directory_check_s: float = 1.0,
                 group_lock_in_process: bool = False, rng: random.Random | None = None,
                 reports: Callable[[], Mapping[str, HostReport]] | None = None,
                 inflight: InFlight | NotRecorded | None = None) -> None:
        self.client = client
        self.engine = engine
        # ``reports``: host records from elsewhere than the API database's
        # table (the control plane reads its cell databases).
        self.settings = settings or SchedulerSettings()
        self.down_after_s = down_after_s
        self.directory = SqlDirectory(engine, self.settings.topology_levels, check_every=directory_check_s)
        self.catalog = PlacementHostCatalog(client, self.directory, default_cell=self.settings.default_cell,
                                            refresh_s=self.settings.catalog_refresh_s,
                                            reports=reports or HostReportLoader(engine, down_after_s=down_after_s))
        self.directory.on_change(self.catalog.invalidate)
        self.scheduler = Scheduler(client, self.catalog, self.directory, self.settings, rng=rng)
        self.group_lock = GroupLock(engine, in_process=group_lock_in_process)
        # The front doors record the claims of requests in flight here, so a
        # scheduler that dies mid-request leaves none for good (see ``inflight``).
        self.inflight = inflight or NotRecorded()

    def select(self, request: ScheduleRequest, alternates: int = 0, *,
               group: str | None = None) -> list[list[Selection]]:
        """``Scheduler.select_destinations``; with ``group`` (a server group's
        uuid) the group is loaded into the request and the new members recorded."""
        if group is None:
            return self.scheduler.select_destinations(request, alternates)
        return groups.select(self, request, alternates, group)

    def dry_run(self, request: ScheduleRequest, *, group: str | None = None) -> list[RankedHost]:
        if group is None:
            return self.scheduler.dry_run(request)
        return groups.dry_run(self, request, group)

    def close(self) -> None:
        if isinstance(self.inflight, InFlight):
            self.inflight.stop()
        self.client.close()
