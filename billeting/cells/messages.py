"""The typed messages that travel on a cell's bus.

Casts into a cell (from the API level, or between a cell's own services):

    compute.<host>  build_and_run_instance  BuildInstance     super conductor / cell conductor → compute
    compute.<host>  terminate_instance      TerminateInstance  API or cell conductor → compute
    compute.<host>  refresh_service         RefreshService     API → compute (push a disable at once)
    conductor       build_instances         RescheduleBuild    compute → its cell conductor
    conductor       delete_instance         DeleteInstance     API → cell conductor (compute may be down)

Every message is a msgspec Struct encoded as JSON; nothing on the bus is a
free-form dict. A build attempt is named by (instance uuid, attempt number):
handlers compare it with the instance record and drop a message whose
attempt is no longer current, which is what makes redelivered or repeated
casts harmless.
"""
from __future__ import annotations

from datetime import datetime

import msgspec

from billeting import typeinfo
from billeting.scheduler.nova import Flavor, Image
from billeting.scheduler.selection import Selection

COMPUTE_TOPIC = "compute"
CONDUCTOR_TOPIC = "conductor"


class HostNode(msgspec.Struct, frozen=True, array_like=True):
    """A (compute service host, compute node) pair, as retry history keeps them."""

    host: str
    node: str


class RequestSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the cell needs of the request spec: who owns the allocation a
    conductor claims, and whether a failed build may be retried."""

    project_id: str
    user_id: str
    consumer_type: str | None = "INSTANCE"
    # The zone the user asked for (None: any); the Selection carries the host's own.
    availability_zone: str | None = None
    server_group: str | None = None
    # False when retrying is off (max_attempts = 1, or one host/node was
    # forced): a failed build then ends in ERROR instead of a reschedule.
    retry: bool = True
    # The build unshelves an offloaded server: when it fails for good the
    # server goes back to shelved_offloaded (to be unshelved again), not ERROR.
    unshelve: bool = False


class InstanceSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    uuid: str
    name: str = ""
    flavor: Flavor
    image: Image | None = None
    # When the API accepted the server (naive UTC): the instance keeps it as
    # its creation time, as Nova's does, so a server's "created" and its place
    # in listings do not change when the cell records it. None: now.
    created_at: datetime | None = None


class BuildInstance(msgspec.Struct, frozen=True, kw_only=True):
    """``build_and_run_instance``: build ``instance`` on ``selection`` (already
    claimed in Placement for the instance); ``alternates`` are the unclaimed
    fall-backs, in order, handed on untouched if the build fails."""

    instance: InstanceSpec
    request: RequestSummary
    selection: Selection
    alternates: tuple[Selection, ...]
    attempt: int  # 1 for the first build


class RescheduleBuild(msgspec.Struct, frozen=True, kw_only=True):
    """``build_instances`` (reschedule): attempt ``attempt`` failed on
    ``failed``; its allocation is already deleted. The conductor claims the
    next of ``alternates`` and casts the build there."""

    instance_uuid: str
    attempt: int
    failed: HostNode
    reason: str
    alternates: tuple[Selection, ...]


class TerminateInstance(msgspec.Struct, frozen=True):
    instance_uuid: str


class DeleteInstance(msgspec.Struct, frozen=True):
    instance_uuid: str


class RefreshService(msgspec.Struct, frozen=True):
    """Re-read the service record now (disabled/enabled) and report it."""

    host: str


def cast_handler(handle):
    """A bus handler for a cast: casts get no reply, so whatever ``handle``
    returns (an outcome for tests and logs) is not sent anywhere."""

    def handler(payload: bytes) -> None:
        handle(payload)

    return handler


encode = msgspec.json.Encoder().encode
decode_build = typeinfo.decoder(BuildInstance).decode
decode_reschedule = typeinfo.decoder(RescheduleBuild).decode
decode_terminate = typeinfo.decoder(TerminateInstance).decode
decode_delete = typeinfo.decoder(DeleteInstance).decode
decode_refresh = typeinfo.decoder(RefreshService).decode
