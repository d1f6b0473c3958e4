"""The compute's part of the lifecycle actions (``cells.lifecycle_states``):
remove the guest of an offloaded instance, respawn a guest in place for a
rebuild, and finish at start-up the rebuilds a crash interrupted.

Hooked into ``ComputeManager`` like ``compute.moves``: its handlers include
``handlers()`` and ``init_host`` runs ``recover()``. Placement is not
touched here: an offload frees the allocation before the cast, and a
rebuild keeps the one the instance holds.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from billeting.cells import instances as inst
from billeting.cells import lifecycle_messages as lm
from billeting.cells import lifecycle_states as states
from billeting.cells.instances import Fault, TaskState, VmState
from billeting.cells.messages import cast_handler
from billeting.compute.driver import BuildInterrupted

if TYPE_CHECKING:
    from billeting.compute.manager import ComputeManager

LOG = logging.getLogger(__name__)


class ComputeLifecycle:
    def __init__(self, manager: ComputeManager) -> None:
        self.manager = manager
        self.host = manager.host
        self.engine = manager.engine
        self.driver = manager.driver

    def handlers(self):
        return {
            "offload_guest": cast_handler(lambda p: self.offload_guest(lm.decode_offload(p))),
            "rebuild_server": cast_handler(lambda p: self.rebuild_server(lm.decode_rebuild(p))),
        }

    def offload_guest(self, msg: lm.OffloadGuest) -> bool:
        """Destroy the guest unless the instance is back on this host meanwhile (unshelved here)."""
        record = inst.get(self.engine, msg.instance_uuid)
        if record is not None and record.host == self.host:
            LOG.info("offload of %s: it runs on %s again; guest kept", msg.instance_uuid, self.host)
            return False
        return self.driver.destroy(msg.instance_uuid)

    def rebuild_server(self, msg: lm.RebuildServer) -> str:
        record = inst.get(self.engine, msg.instance_uuid)
        if record is None or record.task_state is not TaskState.REBUILD_SPAWNING or record.host != self.host:
            LOG.info("rebuild of %s on %s is not current any more; dropped", msg.instance_uuid, self.host)
            return "stale"
        self.driver.destroy(record.uuid)
        allocation = record.selection.allocation_request if record.selection is not None else None
        try:
            self.driver.spawn(record.spec, record.node or "", allocation, self.manager._stop)
        except BuildInterrupted as exc:
            LOG.warning("%s; the rebuild is finished when the compute starts again", exc)
            return "interrupted"
        except Exception as exc:  # noqa: BLE001 - any driver failure fails the rebuild
            self.driver.destroy(record.uuid)
            fault = Fault(code=inst.FAULT_CODE, message=f"Rebuild of instance {record.uuid} failed: {exc}"[:255],
                          details=f"{type(exc).__name__}: {exc}", host=self.host)
            states.fail_rebuild(self.engine, record.uuid, fault=fault)
            LOG.info("rebuild of %s failed on %s: %s", record.uuid, self.host, exc)
            return "failed"
        if not states.finish_rebuild(self.engine, record.uuid, host=self.host, vm_state=msg.vm_state):
            self.driver.destroy(record.uuid)  # deleted meanwhile
            return "stale"
        LOG.info("instance %s rebuilt on %s", record.uuid, self.host)
        return "done"

    def recover(self) -> tuple[str, ...]:
        """Rebuilds of this host's instances that a crash interrupted are run again."""
        again = []
        for record in inst.on_host(self.engine, self.host):
            if record.task_state is TaskState.REBUILD_SPAWNING:
                ends = VmState.ACTIVE if record.vm_state is VmState.ERROR else record.vm_state
                if self.rebuild_server(lm.RebuildServer(instance_uuid=record.uuid, vm_state=ends)) == "done":
                    again.append(record.uuid)
        return tuple(again)

    @staticmethod
    def keeps_guest(record: inst.InstanceRecord) -> bool:
        return record.vm_state in states.ON_HOST
