"""The control plane above the cells, assembled: scheduler (host records from
the cell databases), super conductor (on the API bus — served here or by
separate ``billeting super-conductor`` processes — or in-process), move
tasks, and the compute API's dependencies.

``make_move_tasks`` is the one place the move tasks are constructed.
"""
from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine

from billeting.api.compute import policy as compute_policy
from billeting.api.compute.context import ComputeAPIDeps
from billeting.apidb.cell_directory import CellCatalog
from billeting.apidb.host_reports import HostReportLoader
from billeting.apidb.request_specs import SqlRequestSpecs
from billeting.cells.services import DEFAULT_DOWN_TIME_S
from billeting.conductor import super_conductor as sc
from billeting.conductor.cell_reports import CellHostReports, refresh_on_recovery
from billeting.conductor.lifecycle import LifecycleTasks
from billeting.conductor.wiring import TaskWiring
from billeting.messaging import Bus
from billeting.placement_client.client import PlacementClient
from billeting.scheduler.service.runtime import SchedulerService
from billeting.scheduler.settings import SchedulerSettings

LOG = logging.getLogger(__name__)


def _task_wiring(*, cells: CellCatalog, api_engine: Engine, scheduler: SchedulerService,
                 placement: PlacementClient) -> TaskWiring:
    """What the move and lifecycle tasks act through."""
    from billeting.scheduler.service import groups

    def server_group(uuid: str, request):
        try:
            return groups.for_request(groups.get(scheduler, uuid), request)
        except groups.NotFound:  # deleted since: nothing left to keep together or apart
            return None

    return TaskWiring(cells=cells, specs=SqlRequestSpecs(api_engine), scheduler=scheduler.scheduler,
                      placement=placement, server_groups=server_group,
                      group_lock=lambda uuid: scheduler.group_lock.held(uuid.lower()))


def make_move_tasks(wiring: TaskWiring):
    """The move tasks (``billeting.conductor.moves.ConductorMoveTasks``), or
    None while that module does not exist: server actions then answer 409."""
    try:
        from billeting.conductor.moves import ConductorMoveTasks  # type: ignore[import-not-found]
    except ImportError:
        LOG.warning("billeting.conductor.moves is not available: server move actions are disabled")
        return None
    return ConductorMoveTasks(wiring)


class ControlPlane:
    def __init__(self, *, api_engine: Engine, cells: CellCatalog, placement: PlacementClient,
                 scheduler_settings: SchedulerSettings | None = None, build_attempts: int = sc.DEFAULT_BUILD_ATTEMPTS,
                 api_bus: Bus | None = None, service_down_time_s: float = DEFAULT_DOWN_TIME_S,
                 catalog_refresh_s: float | None = None, conductor_threads: int = 4,
                 serve_conductor: bool = True, policy_file: str | None = None,
                 shelve_offloads_at_once: bool = True) -> None:
        """``policy_file``: an oslo.policy file overriding the compute API's
        rules (raises ``PolicyFileError`` when it cannot be read or parsed).
        ``shelve_offloads_at_once``: Nova's default ``shelved_offload_time``
        of 0; False keeps shelved servers on their host until shelveOffload."""
        enforcer = compute_policy.enforcer(policy_file=policy_file)
        settings = scheduler_settings or SchedulerSettings()
        if catalog_refresh_s is not None:
            settings = dataclasses.replace(settings, catalog_refresh_s=catalog_refresh_s)
        self.api_engine = api_engine
        self.cells = cells
        self.placement = placement
        reports = CellHostReports(api_engine, cells, base=HostReportLoader(api_engine, down_after_s=service_down_time_s),
                                  down_time_s=service_down_time_s)
        self.scheduler = SchedulerService(placement, api_engine, settings, down_after_s=service_down_time_s,
                                          reports=reports)
        self.conductor = sc.SuperConductor(api_engine=api_engine, cells=cells, scheduler=self.scheduler,
                                           settings=sc.ConductorSettings(build_attempts=build_attempts))
        self._server = None
        self._pool: ThreadPoolExecutor | None = None
        if api_bus is not None:
            # serve_conductor=False: separate ``billeting super-conductor``
            # processes consume the casts.
            if serve_conductor:
                self._server = sc.serve(api_bus, self.conductor, threads=conductor_threads)
            cast = sc.SuperConductorAPI(api_bus).schedule_and_build_instances
        else:
            self._pool = ThreadPoolExecutor(max_workers=conductor_threads, thread_name_prefix="super-conductor")
            cast = self._submit
        wiring = _task_wiring(cells=cells, api_engine=api_engine, scheduler=self.scheduler, placement=placement)
        self.moves = make_move_tasks(wiring)
        # Stop/start, shelve/unshelve, rebuild and lock.
        self.lifecycle = LifecycleTasks(wiring, offload_at_once=shelve_offloads_at_once)
        refresh_on_recovery(cells.health, self.scheduler.catalog.invalidate)
        self.deps = ComputeAPIDeps(api_engine=api_engine, cells=cells, scheduler=self.scheduler, cast_build=cast,
                                   moves=self.moves, lifecycle=self.lifecycle, on_service_change=self.scheduler.catalog.invalidate,
                                   service_down_time_s=service_down_time_s, enforcer=enforcer)

    def _submit(self, plan: sc.BuildPlan) -> None:
        def run() -> None:
            try:
                self.conductor.schedule_and_build(plan)
            except Exception:  # noqa: BLE001 - logged; never lost silently
                LOG.exception("request %s: scheduling and handing over failed", plan.request_id)
        self._pool.submit(run)  # type: ignore[union-attr]

    def app(self):
        from billeting.api.compute.app import make_app

        return make_app(self.deps)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
