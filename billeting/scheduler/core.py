"""``select_destinations``: one request in, claimed Selections out.

The stages, cheapest first, each in its own module and saying what it costs:

    request ──▶ sample size                       ``sample``: arithmetic
            ──▶ query (registered pre-filters)    ``query``, ``prefilters``: in-memory look-ups
            ──▶ GET /allocation_candidates?limit  (here, ``_offer``): one Placement query
            ──▶ host states                       ``hoststate``: catalog records + summaries
            ──▶ per instance (``_turns``): filter → weigh → pick
                                                  ``pipeline``, ``filters``, ``weighers``
                then claim down the ranking       ``claiming``: one PUT per host tried
                and consume the pick in memory
            ──▶ alternates from each chosen host's cell, unclaimed
                                                  ``alternates``: one pass per cell
            ──▶ [[chosen, alternate, ...] per instance]

When the filters leave too few hosts in a sample that Placement cut short,
the claims made so far are rolled back and the decision is made again on
the next, larger sample; only the last size (max_placement_results) ends
in NoValidHost (``errors``).

The scheduler claims (decided as Nova did): pick-and-claim is one loop, so a
claim lost to another scheduler costs one more PUT, not a round trip
through a conductor, and the in-memory view of the request's own claims
matches what Placement holds. A request of several instances is all or
nothing: when any instance cannot be claimed, every claim this request made
is deleted before the error leaves this module.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from billeting.common import gcpause
from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.placement_client.model import AllocationRequest, CandidateQuery
from billeting.placement_client.query import UnsupportedQuery, query_string
from billeting.scheduler import alternates as alternates_mod
from billeting.scheduler import claiming
from billeting.scheduler import domain_sample
from billeting.scheduler import explain as explain_mod
from billeting.scheduler import metrics
from billeting.scheduler import query as query_mod
from billeting.scheduler import sample as sample_mod
from billeting.scheduler.catalog import HostCatalog
from billeting.scheduler.claiming import BatchLost, Claimed
from billeting.scheduler.coalesce import Coalescer
from billeting.scheduler.decision import Decision
from billeting.scheduler.directory import CELL_LEVEL, Directory, Domain
from billeting.scheduler.errors import UNKNOWN_LEVEL, InvalidRequest, NoValidHost, PlacementTrouble, SchedulerError
from billeting.scheduler.explain import Explanation
from billeting.scheduler.hoststate import HostState, host_states
from billeting.scheduler.pipeline import FilterStep, Pipeline, RankedList
from billeting.scheduler.request import ScheduleRequest
from billeting.scheduler.selection import Selection
from billeting.scheduler.settings import SchedulerSettings

LOG = logging.getLogger(__name__)



class _SampleShort(Exception):
    """The filters left too few hosts in a sample Placement cut short: a
    larger sample may hold what this one did not."""


@dataclass(slots=True)
class _Offer:
    """What one candidates query gave: host states, the answer's microversion,
    and whether Placement stopped at the query's limit (more may exist)."""

    hosts: list[HostState]
    version: str
    truncated: bool


_CLAIM_EACH, _CLAIM_BATCH, _NO_CLAIM = "claim-each", "claim-batch", "no-claim"
# The outcome of a batched request that must be decided on its own.
_ALONE = object()


class RankedHost(msgspec.Struct, frozen=True):
    """One line of a dry run: a host, its weight and each weigher's share."""

    host: str
    compute_node_uuid: str
    cell_uuid: str
    weight: float
    scores: dict[str, float]
    allocation_request: AllocationRequest | None


@dataclass(slots=True, eq=False)
class _Asked:
    """A single-instance request, its query built, waiting to be decided
    together with the requests that send Placement the same query."""

    request: ScheduleRequest
    alternates: int
    located: dict
    records: dict
    decision: Decision
    query: CandidateQuery
    qs: str


@dataclass(slots=True)
class _Turn:
    """One instance's turn in the pick-and-claim loop."""

    index: int
    won: Claimed | None         # None: no host of the ranking could take it
    lost: int                   # claims lost to other schedulers on the way
    ranked: RankedList          # the ranking it was picked from
    steps: list[FilterStep]     # what removed hosts for it (for an explanation)
    pool: list[HostState]       # the hosts that passed the once-per-request filters


@dataclass(slots=True)
class _Planned:
    """A batched request's pick, waiting for the batch's one claim."""

    index: int                  # the request's place in the batch
    won: Claimed
    ranked: RankedList
    decision: Decision


class Scheduler:
    """Thread-safe: each call keeps its state in its own ``Decision``."""

    def __init__(self, client: PlacementClient, catalog: HostCatalog, directory: Directory,
                 settings: SchedulerSettings | None = None, *, rng: random.Random | None = None) -> None:
        self.client = client
        self.catalog = catalog
        self.directory = directory
        self.settings = settings or SchedulerSettings()
        self.settings.check()
        self.pipeline = Pipeline(self.settings, rng)
        # Concurrent callers of one process asking the same query share one
        # candidates answer and one claim transaction (see ``coalesce``).
        self._together: Coalescer[_Asked] | None = (
            Coalescer(self._decide_together) if self.settings.coalesce_requests else None)

    # --- front ---------------------------------------------------------------------

    def select_destinations(self, request: ScheduleRequest, alternates: int = 0, *,
                            claim: bool = True) -> list[list[Selection]]:
        """Per instance, ``[chosen, alternate, ...]``; the chosen is claimed.
        Raises NoValidHost (with an explanation), SchedulerError.

        ``claim=False`` ranks and picks exactly the same way but writes
        nothing: every Selection comes back unclaimed, for callers that claim
        elsewhere (the simulator's "legacy" and "conductor claims" designs)."""
        started = time.perf_counter()
        try:
            self._check(request, alternates)
            # A request builds a few thousand small objects (host states, their
            # caches); with the default thresholds the cyclic collector would
            # walk them again and again, which cost as much as building them.
            with gcpause.paused():
                if claim and self._together is not None and self._joins_others(request):
                    selections = self._select_together(request, alternates)
                else:
                    selections = self._select_near(request, alternates, claim)
        except NoValidHost as exc:
            metrics.observe_no_valid_host(exc.explanation)
            raise
        finally:
            metrics.observe_decision(time.perf_counter() - started)
        if claim:
            metrics.observe_placed(len(selections))
        return selections

    @staticmethod
    def _joins_others(request: ScheduleRequest) -> bool:
        """Decided in a batch with requests like it? One instance, one
        Placement query (``near`` may ask several) and no server group (its
        caller holds the group's lock while it waits; and a group's members
        must see each other's claims, which one by one is simplest)."""
        return request.num_instances == 1 and request.near is None and request.server_group is None

    def _select_together(self, request: ScheduleRequest, alternates: int) -> list[list[Selection]]:
        located, records = self._references(request)
        decision, query, qs = self._query(request, located, records, None, self._sizes(request, alternates)[0])
        asked = _Asked(request, alternates, located, records, decision, query, qs)
        return self._together.run(qs, asked)  # type: ignore[union-attr, return-value]

    def _select_near(self, request: ScheduleRequest, alternates: int, claim: bool) -> list[list[Selection]]:
        located, records = self._references(request)
        if request.near is None:
            return self._select(request, alternates, located, records, None, None, claim)
        decision = Decision(request, self.settings, self.directory)
        last: NoValidHost | None = None
        for level, domain in self._guard(lambda: query_mod.nearness_domains(decision, located, records)):
            try:
                return self._select(request, alternates, located, records, level, domain, claim)
            except NoValidHost as exc:
                last = exc  # widen to the next level
        raise last  # type: ignore[misc]

    def dry_run(self, request: ScheduleRequest) -> list[RankedHost]:
        """The hosts the first instance would be ranked over, best first, with
        each weigher's score; nothing is claimed. Raises NoValidHost when none."""
        self._check(request, 0)
        with gcpause.paused():
            located, records = self._references(request)
            decision, offer, query, qs = self._prepare(request, located, records, None)
            hosts = offer.hosts
            steps: list[FilterStep] = []
            _, ranked = self.pipeline.rank(hosts, decision, steps, scores=True)
        if not ranked:
            raise NoValidHost(self._explain(request, query, qs, len(hosts), steps, 0, 0, decision.exclusions))
        return [RankedHost(r.host.name, r.host.uuid, r.host.record.cell_uuid, r.weight, r.scores,
                           r.host.first_candidate()) for r in ranked]

    # --- steps -----------------------------------------------------------------------

    def _check(self, request: ScheduleRequest, alternates: int) -> None:
        if not request.instance_uuids:
            raise InvalidRequest("a request names at least one instance")
        if len(set(request.instance_uuids)) != len(request.instance_uuids):
            raise InvalidRequest("instance uuids must be distinct")
        if alternates < 0:
            raise InvalidRequest("alternates must not be negative")
        if not any(g.resources for g in request.groups):
            raise InvalidRequest("a request asks for at least one resource")
        check_domains(request, self.directory)

    def _guard(self, work):
        """Run ``work``; a request it proves unsatisfiable is a NoValidHost
        that says why, without asking Placement anything."""
        try:
            return work()
        except query_mod.Unsatisfiable as exc:
            raise NoValidHost(explain_mod.unsatisfiable(str(exc))) from None

    def _references(self, request: ScheduleRequest):
        wanted = query_mod.referenced_instances(request)
        if not wanted:
            return {}, {}
        try:
            located = self.catalog.locate(wanted)
        except PlacementError as exc:
            raise PlacementTrouble(f"cannot locate the instances this request refers to: {exc.detail}") from None
        records = self.catalog.records(set(located.values()))
        return located, records

    def _sizes(self, request: ScheduleRequest, alternates: int) -> tuple[int, ...]:
        """The sample sizes this request may be decided on, smallest first."""
        setting = self.settings.candidate_sample
        try:
            fleet = self.catalog.size() if setting == sample_mod.ADAPTIVE else 0
        except PlacementError as exc:  # the catalog's own reads of Placement
            raise PlacementTrouble(f"Placement could not list the hosts: {exc.detail or exc}") from None
        group, n = request.server_group, request.num_instances
        return sample_mod.sizes(setting, fleet=fleet, wanted=n + alternates + sample_mod.group_wanted(group, n),
                                cap=self.settings.max_placement_results,
                                every=sample_mod.needs_every(group, n))

    def _prepare(self, request, located, records, near: Domain | None, size: int | None = None,
                 alternates: int = 0):
        decision, query, qs = self._query(request, located, records, near, size)
        offer = self._offer(query, decision, alternates)
        decision.version = offer.version
        return decision, offer, query, qs

    def _query(self, request, located, records, near: Domain | None, size: int | None = None):
        """(the request's Decision, its Placement query, the query string).
        ``size``: the sample size (None: max_placement_results)."""
        decision = Decision(request, self.settings, self.directory)
        try:
            self._guard(lambda: query_mod.seed(decision, located, records))
            query = self._guard(lambda: query_mod.build(decision, self.catalog, version=self.client.version,
                                                        near=near, sample=size))
            qs = query_string(query, self.client.version)
        except UnsupportedQuery as exc:
            raise InvalidRequest(f"this Placement cannot answer the request: {exc}") from None
        return decision, query, qs

    def _offer(self, query, decision: Decision | None = None, alternates: int = 0) -> _Offer:
        """Ask Placement once; for a group kept apart per failure domain,
        once per domain the sample must span (``domain_sample``)."""
        group = decision.request.server_group if decision is not None else None
        needed = (sample_mod.domains_needed(group, decision.request.num_instances, alternates)
                  if group is not None else 1)
        try:
            if needed > 1 and query.limit is not None:
                candidates, truncated = domain_sample.ask(
                    query, group.scope, needed, candidates=self.client.allocation_candidates,
                    records=self.catalog.records, directory=self.directory)
            else:
                candidates = self.client.allocation_candidates(query)
                truncated = query.limit is not None and len(candidates.allocation_requests) >= query.limit
        except UnsupportedQuery as exc:
            raise InvalidRequest(f"this Placement cannot answer the request: {exc}") from None
        except PlacementError as exc:
            if exc.status == 400:
                raise InvalidRequest(f"Placement rejected the query: {exc.detail}") from None
            raise PlacementTrouble(f"Placement could not answer: {exc.detail or exc}") from None
        roots = {s.root_provider_uuid or rp for rp, s in candidates.provider_summaries.items()}
        try:
            records = self.catalog.records(roots)
        except PlacementError as exc:  # the catalog's own reads of Placement
            raise PlacementTrouble(f"Placement could not list the hosts: {exc.detail or exc}") from None
        return _Offer(host_states(candidates, records, self.directory), candidates.version, truncated)

    def _select(self, request, alternates, located, records, level: str | None,
                near: Domain | None, claim: bool = True, prepared=None) -> list[list[Selection]]:
        """Decide on samples of growing size until one holds enough hosts.
        ``prepared``: (decision, query, qs) already built for the first size."""
        sizes = self._sizes(request, alternates)
        for i, size in enumerate(sizes):
            last = i == len(sizes) - 1
            try:
                return self._select_sized(request, alternates, located, records, level, near, claim,
                                          size, not last, prepared)
            except _SampleShort:
                prepared = None
                metrics.observe_sample_grown()
                LOG.debug("a sample of %d candidates held too few hosts; asking for %d", size, sizes[i + 1])
        raise AssertionError("the last sample size never grows")  # pragma: no cover

    def _select_sized(self, request, alternates, located, records, level: str | None, near: Domain | None,
                      claim: bool, size: int, grow: bool, prepared) -> list[list[Selection]]:
        args = (request, alternates, located, records, level, near)
        if not claim:
            return self._decide(*args, _NO_CLAIM, prepared, size, grow)
        if request.num_instances == 1:
            return self._decide(*args, _CLAIM_EACH, prepared, size, grow)
        try:
            return self._decide(*args, _CLAIM_BATCH, prepared, size, grow)
        except BatchLost as lost:
            # Capacity went elsewhere between our query and the batch claim:
            # decide again, claiming instance by instance so each lost claim
            # just falls back to the next host.
            LOG.info("batch claim of %d instances lost (%s); claiming one by one",
                     request.num_instances, lost)
            metrics.observe_fallback("instances")
            return self._decide(*args, _CLAIM_EACH, None, size, grow)

    def _decide(self, request, alternates, located, records, level: str | None,
                near: Domain | None, mode: str, prepared=None, size: int | None = None,
                grow: bool = False) -> list[list[Selection]]:
        """Rank and pick each instance in turn on the request's in-memory
        view. ``mode``: claim each pick as it is made (falling back down the
        ranked list when a claim loses), plan every pick and claim them all
        in one ``POST /allocations`` (all or nothing,
        docs/design/select-destinations.md#several-instances), or claim nothing."""
        started = time.perf_counter()
        if prepared is None:
            decision, offer, query, qs = self._prepare(request, located, records, near, size, alternates)
        else:  # (decision, query, qs) built by the caller
            decision, query, qs = prepared
            offer = self._offer(query, decision, alternates)
            decision.version = offer.version
        hosts = offer.hosts
        offered = len(hosts)
        if hosts:
            decision.consumption = hosts[0].consumption
        steps: list[FilterStep] = []
        claimed: list[Claimed] = []
        lost = 0
        dropped: set[str] = set()
        ranked: RankedList | list = []
        ran_out = False
        each = mode == _CLAIM_EACH
        try:
            for turn in self._turns(hosts, decision, request.instance_uuids, lambda _: request, dropped, each):
                lost += turn.lost
                steps, ranked, hosts = turn.steps, turn.ranked, turn.pool
                if turn.won is None:
                    ran_out = True
                    break
                claimed.append(turn.won)
        finally:
            if each and (ran_out or len(claimed) < request.num_instances):
                claiming.rollback(self.client, claimed)
        if ran_out:
            if grow and offer.truncated:
                raise _SampleShort()
            # Explained after the rollback, so the counts describe the fleet
            # as the next request will find it.
            raise NoValidHost(self._explain(request, query, qs, offered, steps, lost, len(claimed),
                                            decision.exclusions))
        if mode == _CLAIM_BATCH:
            claiming.claim_batch(self.client, claimed, request)
        if alternates and len(claimed) > 1:
            # Rank once more, with every filter: the siblings' claims changed the picture.
            decision.index = 0
            _, ranked = self.pipeline.rank(hosts, decision)
        selections = self._selections(claimed, ranked if alternates else [], dropped, decision, alternates,
                                      level, mode != _NO_CLAIM)
        LOG.debug("placed %d instance(s) in %.1f ms (%d hosts offered, %d claims lost)",
                  len(claimed), (time.perf_counter() - started) * 1000, offered, lost)
        return selections

    def _decide_together(self, batch: list[_Asked]) -> list[object]:
        """Per request of ``batch`` (one instance each, one query for all):
        its Selections, or the exception it raises.

        One candidates answer, one set of host states: each request is
        ranked in turn on the batch's in-memory view (the earlier requests'
        picks consumed, so a spreading weigher moves on), then every pick is
        claimed in one ``POST /allocations``. When Placement refuses that as
        a whole (capacity taken by another scheduler meanwhile, or an
        instance that already holds allocations), each request is decided
        again on its own, claim by claim, as if it had come alone.

        The query's sample is sized for one request; the batch asks for as
        many times more as it has requests. A request the batch's sample
        could not place is decided on its own afterwards, on a larger one."""
        metrics.observe_batch(len(batch))
        if len(batch) == 1:
            a = batch[0]
            return [_outcome(lambda: self._select(a.request, a.alternates, a.located, a.records, None, None,
                                                  prepared=(a.decision, a.query, a.qs)))]
        query = batch[0].query
        if query.limit is not None and query.limit < self.settings.max_placement_results:
            query = msgspec.structs.replace(
                query, limit=min(query.limit * len(batch), self.settings.max_placement_results))
        try:
            offer = self._offer(query)
        except SchedulerError as exc:
            return [exc] * len(batch)
        hosts = offer.hosts
        consumption = hosts[0].consumption if hosts else None
        outcomes: list[object] = [None] * len(batch)
        planned: list[_Planned] = []
        for members in _alike(batch):
            self._plan_alike(batch, members, offer, consumption, outcomes, planned)
        if planned:
            writes = {p.won.instance: claiming.claim_body(p.won, batch[p.index].request) for p in planned}
            try:
                outcome = self.client.post_allocations(writes)
            except PlacementError as exc:
                trouble = PlacementTrouble(f"Placement could not take the claims: {exc.detail or exc}")
                return [trouble if o is None or o is _ALONE else o for o in outcomes]
            if not outcome.ok:
                LOG.info("claims of %d requests decided together lost (%s: %s); deciding each on its own",
                         len(planned), outcome.result.value, outcome.detail)
                metrics.observe_fallback("coalesced")
                return [_outcome(lambda a=a: self._select(a.request, a.alternates, a.located, a.records, None,
                                                          None))
                        for a in batch]
        # Alternates never name a host another request of the batch was given.
        given = {p.won.host.uuid for p in planned}
        for p in planned:
            alternates = batch[p.index].alternates
            outcomes[p.index] = self._selections([p.won], p.ranked if alternates else [],
                                                 given - {p.won.host.uuid}, p.decision, alternates, None)
        # Those the sample was too small for, now that the batch's claims are in.
        for i, o in enumerate(outcomes):
            if o is _ALONE:
                a = batch[i]
                outcomes[i] = _outcome(lambda a=a: self._select(a.request, a.alternates, a.located, a.records,
                                                                None, None))
        LOG.debug("decided %d requests together (%d hosts offered, %d placed)", len(batch), len(hosts),
                  len(planned))
        return outcomes

    def _plan_alike(self, batch: list[_Asked], members: list[int], offer: _Offer,
                    consumption, outcomes: list[object], planned: list[_Planned]) -> None:
        """Pick a host for each of ``members`` (indexes into ``batch`` of
        requests alike but for their instance), claiming nothing yet.

        Alike requests are ranked as the instances of one request are: one
        ``Decision``, so the filters that depend only on the request run
        once and the weighers' raw values are kept, recomputed only for the
        hosts a pick changed. Each request still gets its own ranking.
        A request left without a host in a truncated sample is marked
        ``_ALONE``: decided on its own later, on a larger sample."""
        hosts, version = offer.hosts, offer.version
        first = batch[members[0]]
        decision = first.decision
        if len(members) > 1:
            decision.request = msgspec.structs.replace(
                first.request, instance_uuids=tuple(batch[i].request.instance_uuids[0] for i in members))
        decision.version, decision.consumption = version, consumption
        instances = [batch[i].request.instance_uuids[0] for i in members]
        for turn in self._turns(hosts, decision, instances, lambda k: batch[members[k]].request, set(), False):
            i = members[turn.index]
            if turn.won is None:
                outcomes[i] = _ALONE if offer.truncated else _outcome(
                    lambda: self._no_valid_host(batch[i], len(hosts), turn.steps))
                continue
            planned.append(_Planned(i, turn.won, turn.ranked, decision))

    def _turns(self, hosts: list[HostState], decision: Decision, instances, request_of, dropped: set[str],
               claim: bool) -> Iterator[_Turn]:
        """The pick-and-claim loop, one turn per instance: rank the hosts on
        the decision's in-memory view, claim down the ranking (or only pick,
        when ``claim`` is false), consume the pick in memory so the next
        turn sees it. ``request_of(k)``: the request the k-th instance
        belongs to (one for a request's instances, one each in a batch).

        Cost per turn: the per-instance filters and the weighers over the
        hosts the first turn's once-per-request filters kept, plus one claim
        per host tried."""
        pool = hosts
        once: list[FilterStep] = []
        for index, instance in enumerate(instances):
            decision.index = index
            trace: list[FilterStep] = []
            passed, ranked = self.pipeline.rank(pool, decision, trace)
            if index == 0:
                pool, steps = passed, trace  # later instances re-check only per-instance filters
                once = [s for s in trace if s.once_per_request]
            else:
                # What removed hosts for this instance: the first one's
                # once-per-request filters, then its own per-instance ones.
                steps = once + trace
            won, lost = claiming.claim_down(self.client, ranked, instance, request_of(index), decision, dropped,
                                            claim)
            if won is not None:
                won.host.consumption.add(won.request)
                decision.placed(won.host)
            yield _Turn(index, won, lost, ranked, steps, pool)

    def _no_valid_host(self, asked: _Asked, offered: int, steps: list[FilterStep]):
        raise NoValidHost(self._explain(asked.request, asked.query, asked.qs, offered, steps, 0, 0,
                                        asked.decision.exclusions))

    def _selections(self, claimed: list[Claimed], ranked, dropped: set[str], decision: Decision,
                    alternates: int, level: str | None, claim: bool = True) -> list[list[Selection]]:
        return alternates_mod.selections(claimed, ranked, dropped, decision, alternates, level,
                                         self.settings.alternates_from, claim)

    def _explain(self, request, query, qs, offered, steps, lost, placed, exclusions) -> Explanation:
        hosts = self.catalog.host_uuids()
        shortfalls = []
        if offered < len(hosts):
            shortfalls = explain_mod.placement_shortfalls(
                self.client, query, set(hosts), explain_mod.aggregate_names(self.directory, request.availability_zone),
                exclusions)
        return explain_mod.explain(instances=request.num_instances, hosts_total=len(hosts),
                                   hosts_offered=offered, query=qs, placement=shortfalls, steps=steps,
                                   claims_lost=lost, placed=placed)


def _alike(batch: list[_Asked]) -> list[list[int]]:
    """Indexes of ``batch`` grouped by request, instance aside (and by the
    alternates asked for), in order of first arrival."""
    groups: dict[bytes, list[int]] = {}
    for i, a in enumerate(batch):
        shape = msgspec.json.encode(msgspec.structs.replace(a.request, instance_uuids=()))
        groups.setdefault(b"%d:%s" % (a.alternates, shape), []).append(i)
    return list(groups.values())


def _outcome(work) -> object:
    """``work()``'s value, or the scheduler exception it raised, as a value."""
    try:
        return work()
    except SchedulerError as exc:  # NoValidHost among them
        return exc


def check_domains(request: ScheduleRequest, directory: Directory) -> None:
    """The levels and the domain a request names must exist (400, whichever
    front door it came through): unchecked, an unknown level would be a 409
    "no valid host" in ``near`` and no constraint at all in a "different"
    ``domain_constraints`` entry."""
    levels = directory.levels
    for c in request.domain_constraints:
        if c.level not in (*levels, CELL_LEVEL):
            raise InvalidRequest(f"domain_constraints: unknown topology level {c.level!r} (levels: "
                                 f"{', '.join((*levels, CELL_LEVEL))})", code=UNKNOWN_LEVEL)
    near = request.near
    if near is None:
        return
    if near.level not in levels:  # nearness widens through the levels; a cell is none of them
        raise InvalidRequest(f"near: unknown topology level {near.level!r} (levels: {', '.join(levels)})",
                             code=UNKNOWN_LEVEL)
    if near.domain is not None and directory.domain(near.level, near.domain) is None:
        raise InvalidRequest(f"near: no {near.level} named {near.domain!r}")
