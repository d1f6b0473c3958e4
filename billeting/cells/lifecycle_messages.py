"""The casts of the lifecycle actions on a cell's bus (see ``lifecycle_states``).

    compute.<host>  offload_guest   OffloadGuest   the instance was offloaded: remove its guest
    compute.<host>  rebuild_server  RebuildServer  respawn the guest in place with the record's image

Handlers compare the message with the instance record and drop one that is
no longer current, so a redelivered cast is harmless.
"""
from __future__ import annotations

import msgspec

from billeting import typeinfo
from billeting.cells.instances import VmState


class OffloadGuest(msgspec.Struct, frozen=True, kw_only=True):
    instance_uuid: str


class RebuildServer(msgspec.Struct, frozen=True, kw_only=True):
    """Respawn on the recipient (the instance's host); ``vm_state``: the state
    it ends in (a stopped server stays stopped, as in Nova)."""

    instance_uuid: str
    vm_state: VmState


encode = msgspec.json.Encoder().encode
decode_offload = typeinfo.decoder(OffloadGuest).decode
decode_rebuild = typeinfo.decoder(RebuildServer).decode


class ComputeLifecycleAPI:
    """Typed senders for the casts above, on one cell's bus."""

    def __init__(self, bus) -> None:
        self.bus = bus

    def _cast(self, host: str, method: str, message) -> None:
        from billeting.cells.messages import COMPUTE_TOPIC

        self.bus.cast(COMPUTE_TOPIC, method, encode(message), server=host)

    def offload_guest(self, host: str, instance_uuid: str) -> None:
        self._cast(host, "offload_guest", OffloadGuest(instance_uuid=instance_uuid))

    def rebuild_server(self, host: str, instance_uuid: str, vm_state: VmState) -> None:
        self._cast(host, "rebuild_server", RebuildServer(instance_uuid=instance_uuid, vm_state=vm_state))
