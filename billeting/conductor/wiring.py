"""What the compute API's conductor tasks (``moves``, ``lifecycle``) are built
from, and the steps they share: written once here so that a new dependency
or a change to how a spec or server group is read reaches both.

The compute API builds one ``TaskWiring`` and hands it to each task class;
tests build their own from fakes.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import msgspec

from billeting.cells.instances import InstanceRecord
from billeting.conductor.move_protocols import CellDirectory, MoveRefused, RequestSpecs, StoredRequestSpec
from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.scheduler.core import Scheduler
from billeting.scheduler.errors import NoValidHost, SchedulerError
from billeting.scheduler.request import ScheduleRequest, ServerGroup
from billeting.scheduler.selection import Selection

# The instance's server group as the scheduler needs it (policy and the other
# members), so a move or an unshelve keeps (anti-)affinity.
GroupResolver = Callable[[str, ScheduleRequest], ServerGroup | None]
# Holds a server group's lock (the one its members' builds are decided under)
# for the ``with`` block: scheduling and claiming inside it, a member cannot
# decide on a picture another member's decision is about to change.
GroupLocker = Callable[[str], AbstractContextManager[object]]


@dataclass(frozen=True, kw_only=True)
class TaskWiring:
    cells: CellDirectory
    specs: RequestSpecs
    scheduler: Scheduler
    placement: PlacementClient
    # Ranked hosts kept after the first: tried in turn when a move's swap onto
    # one is refused, handed to an unshelve's build for the cell conductor's retry.
    alternates: int = 2
    # None: groups unknown, requests go without one.
    server_groups: GroupResolver | None = None
    # None: nothing else decides for a group (a test's fakes).
    group_lock: GroupLocker | None = None


class CellTasks:
    """The base of the task classes: the wiring's parts as attributes, and
    the reads and the scheduling call both kinds of task make."""

    def __init__(self, wiring: TaskWiring) -> None:
        self.cells = wiring.cells
        self.specs = wiring.specs
        self.scheduler = wiring.scheduler
        self.placement = wiring.placement
        self.alternates = wiring.alternates
        self.server_groups = wiring.server_groups
        self.group_lock = wiring.group_lock

    def _spec(self, record: InstanceRecord) -> StoredRequestSpec:
        """The stored request spec, or one rebuilt from the record (servers made before specs were kept)."""
        spec = self.specs.get(record.uuid)
        if spec is not None:
            return spec
        return StoredRequestSpec(instance_uuid=record.uuid, project_id=record.project_id, user_id=record.user_id,
                                 flavor=record.flavor, image=record.image,
                                 availability_zone=record.request.availability_zone)

    def _group_held(self, spec: StoredRequestSpec) -> AbstractContextManager[object]:
        """The spec's server group held for a decision that claims (nothing to hold without one)."""
        if spec.server_group and self.group_lock is not None:
            return self.group_lock(spec.server_group)
        return nullcontext()

    def _select(self, spec: StoredRequestSpec, request: ScheduleRequest, *, claim: bool,
                no_host: Callable[[NoValidHost], str]) -> list[list[Selection]]:
        """The scheduler's lines for ``request`` with the spec's server group,
        every refusal as a MoveRefused (``no_host`` words a NoValidHost)."""
        if spec.server_group and self.server_groups is not None:
            group = self.server_groups(spec.server_group, request)
            if group is not None:
                request = msgspec.structs.replace(request, server_group=group)
        try:
            return self.scheduler.select_destinations(request, self.alternates, claim=claim)
        except NoValidHost as exc:
            raise MoveRefused(no_host(exc), status=400) from None
        except SchedulerError as exc:
            raise MoveRefused(exc.message, status=400 if exc.status == 400 else 409) from None
        except PlacementError as exc:
            raise MoveRefused(f"Placement could not answer: {exc.detail or exc}", status=409) from None
