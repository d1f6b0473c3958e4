"""The scenario's ``failures.down`` entries, resolved against the built fleet.

A host or a rack going down takes its hosts out (the scheduler's up check
sees it; builds on them fail); coming back puts them in again. A sharing
provider going down fails every build whose allocation uses it until it is
back: the scheduler still picks its hosts (nothing tells Placement), which
is what the computes' self-disabling then meets.
"""
from __future__ import annotations

from typing import Literal

import msgspec

from billeting.sim.fleet import FleetMap, sim_uuid
from billeting.sim.scenario import HostDown


class Outage(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["hosts", "sharing"]
    uuids: tuple[str, ...]        # host uuids, or the one sharing provider's
    at_s: float
    up_at_s: float | None


def resolve(entries: list[HostDown], fleet: FleetMap) -> list[Outage]:
    """Scenario checks made sure every name exists; a KeyError here is a bug."""
    by_name = {h.name: h.uuid for h in fleet.hosts}
    found = []
    for d in entries:
        kind, name = d.target()
        if kind == "host":
            uuid = fleet.hosts[d.host].uuid if isinstance(d.host, int) else by_name[f"{fleet.prefix}{name}"]
            found.append(Outage(kind="hosts", uuids=(uuid,), at_s=d.at_s, up_at_s=d.up_at_s))
        elif kind == "rack":
            uuids = tuple(h.uuid for h in fleet.hosts if h.domains["rack"] == name)
            found.append(Outage(kind="hosts", uuids=uuids, at_s=d.at_s, up_at_s=d.up_at_s))
        else:
            uuid = sim_uuid(fleet.prefix, "sharing", name)
            if uuid not in fleet.sharing:
                raise KeyError(name)
            found.append(Outage(kind="sharing", uuids=(uuid,), at_s=d.at_s, up_at_s=d.up_at_s))
    return found
