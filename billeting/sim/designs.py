"""The three designs compared: who claims, and how a failed build is retried.

legacy            the scheduler only picks (claim=False); the compute claims
                  when the build reaches it; a refused claim or a failed build
                  goes back up to the scheduler for a new pick (an *upcall*),
                  excluding the hosts already tried.
conductor-claims  the scheduler ranks (claim=False, ``ranked`` hosts); the super
                  conductor claims down that list; what is left after the chosen
                  host goes to the cell as alternates.
scheduler-claims  the scheduler claims with fall-back down its ranked list and
                  returns ``alternates`` unclaimed alternates per instance.

Both cell designs retry a failed build inside the cell with the control
plane's own ``claim_next_alternate`` (the same function, not a copy): the
compute un-claims, the cell conductor claims the next alternate, and nothing
ever calls the scheduler again.

Per design, two defences against hosts that always fail (``host_health``):
computes that disable themselves after ``disable_after_failures`` failed
builds in a row (every design), and a cell conductor that tries alternates
on hosts it saw fail within ``recent_failure_window_s`` last (cell designs).
"""
from __future__ import annotations

from billeting.conductor.reschedule import EXHAUSTED, claim_next_alternate
from billeting.placement_client import claims
from billeting.scheduler.selection import Selection
from billeting.sim.engine import CLAIMS_LOST, MAX_RETRIES, Instance, Run
from billeting.sim.fleet import PROJECT, USER

CONSUMER_TYPE = "INSTANCE"


def _cell_walk(run: Run, inst: Instance, chosen: Selection, alternates: tuple[Selection, ...]) -> None:
    """Build on ``chosen`` (already claimed); on failure retry on alternates in the cell."""
    sel = chosen
    while True:
        run.cast()                          # conductor -> compute
        failed = run.build(inst, sel.compute_node_uuid)
        if failed is None:
            run.active(inst)
            return
        run.unclaim(inst)                   # the failed compute deletes its allocation first
        run.cast()                          # compute -> cell conductor
        run.health.saw_failure(sel.cell_uuid, sel.service_host)
        if inst.attempts >= run.d.max_attempts:
            run.error(inst, MAX_RETRIES)
            return
        nxt = claim_next_alternate(run.client, inst.uuid, alternates, project_id=PROJECT, user_id=USER,
                                   consumer_type=CONSUMER_TYPE, avoid=run.health.avoid(sel.cell_uuid))
        if nxt.exhausted:
            run.error(inst, EXHAUSTED)
            return
        sel, alternates = nxt.selection, nxt.remaining
        run.claimed(inst, sel)


def scheduler_claims(run: Run, insts: list[Instance], request) -> None:
    lines = run.select(request, run.d.alternates, claim=True)
    if isinstance(lines, str):
        for inst in insts:
            run.error(inst, lines)
        return
    for inst, line in zip(insts, lines):
        run.claimed(inst, line[0])
    run.parallel(lambda pair: _cell_walk(run, pair[0], pair[1][0], tuple(pair[1][1:])), list(zip(insts, lines)))


def conductor_claims(run: Run, insts: list[Instance], request) -> None:
    lines = run.select(request, max(run.d.ranked - 1, run.d.alternates), claim=False)
    if isinstance(lines, str):
        for inst in insts:
            run.error(inst, lines)
        return
    # The super conductor claims down each instance's ranked list.
    won: list[tuple[Instance, Selection, tuple[Selection, ...]]] = []
    for inst, line in zip(insts, lines):
        nxt = claim_next_alternate(run.client, inst.uuid, tuple(line), project_id=PROJECT, user_id=USER,
                                   consumer_type=CONSUMER_TYPE)
        if nxt.exhausted:
            break
        run.claimed(inst, nxt.selection)
        won.append((inst, nxt.selection, nxt.remaining[:run.d.alternates]))
    if len(won) < len(insts):
        for inst, _, _ in won:             # all or nothing
            run.unclaim(inst)
        for inst in insts:
            run.error(inst, CLAIMS_LOST)
        return
    run.parallel(lambda w: _cell_walk(run, *w), won)


def legacy(run: Run, insts: list[Instance], request) -> None:
    lines = run.select(request, 0, claim=False)
    if isinstance(lines, str):
        for inst in insts:
            run.error(inst, lines)
        return
    run.parallel(lambda pair: _legacy_walk(run, pair[0], pair[1][0]), list(zip(insts, lines)))


def _legacy_walk(run: Run, inst: Instance, sel: Selection) -> None:
    while True:
        run.cast()                          # conductor -> compute
        outcome = claims.claim(run.client, inst.uuid, sel.allocation_request, project_id=PROJECT,
                               user_id=USER, consumer_type=CONSUMER_TYPE,
                               version=sel.allocation_request_version or None)
        if outcome.ok:
            run.claimed(inst, sel)
            failed = run.build(inst, sel.compute_node_uuid)
            if failed is None:
                run.active(inst)
                return
            run.unclaim(inst)
        else:
            inst.attempts += 1              # the compute's claim failed: a reschedule like any other
        inst.tried.append(sel.service_host)
        if inst.attempts >= run.d.max_attempts:
            run.error(inst, MAX_RETRIES)
            return
        run.cast()                          # compute -> conductor
        run.upcalls += 1                    # ... -> scheduler: the upcall
        lines = run.select(run.request_for([inst], tuple(inst.tried)), 0, claim=False)
        if isinstance(lines, str):
            run.error(inst, lines)
            return
        sel = lines[0][0]


FLOWS = {"legacy": legacy, "conductor-claims": conductor_claims, "scheduler-claims": scheduler_claims}
