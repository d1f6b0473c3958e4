"""Typed candidates straight from the candidates engine, for the in-process
client: the very ``Candidates`` that decoding the HTTP answer for the same
engine result gives (same values, same key and list order), without
rendering JSON and parsing it back.

Most of an answer repeats from one request to the next, so two memos keep
the objects of earlier answers (bounded, then emptied and refilled):

* summaries, by the engine's summary object: the engine's summary cache
  hands back the same object while a provider is unchanged, so a hit is
  known to be exactly right; a changed provider gets a new object and is
  converted again.
* single-provider allocation requests (the commonest answer: one group, a
  flat fleet), by provider for each (suffix, resources): the same flavor
  asks for the same request on the same host every time.

Everything the memos hold is frozen and read-only by contract (the engine's
inner dicts are shared the same way), so two answers may share objects.
"""
from __future__ import annotations

import threading
from operator import attrgetter, itemgetter

import orjson

from billeting import typeinfo
from billeting.placement import candidates as engine
from billeting.placement_client.model import (
    AllocationRequest,
    Candidates,
    Capacity,
    ProviderResources,
    ProviderSummary,
)

_decode_resources = typeinfo.decoder(dict[str, Capacity]).decode
_decode_traits = typeinfo.decoder(tuple[str, ...]).decode
# Entries kept before a memo is emptied: about 1.2 KB per host for its
# summary and its request of one flavor, so at most about 25 MB in all.
_MAX_SUMMARIES = 20_000
_MAX_REQUESTS = 20_000
_uuid = attrgetter("uuid")
_typed = itemgetter(1)


def summary(s: engine.EngineSummary, mv: tuple[int, int]) -> ProviderSummary:
    """One engine summary as the typed summary of microversion ``mv``."""
    resources = s.resources
    if isinstance(resources, orjson.Fragment):
        typed_resources = _decode_resources(orjson.dumps(resources))
    else:
        typed_resources = {rc: Capacity(c["capacity"], c["used"]) for rc, c in resources.items()}
    if mv < (1, 17):
        return ProviderSummary(typed_resources)
    traits = s.traits
    typed_traits = _decode_traits(orjson.dumps(traits)) if isinstance(traits, orjson.Fragment) else tuple(traits)
    if mv < (1, 29):
        return ProviderSummary(typed_resources, typed_traits)
    return ProviderSummary(typed_resources, typed_traits, s.parent_uuid, s.root_uuid)


def requests(found: list[engine.EngineAllocation], mv: tuple[int, int]) -> list[AllocationRequest]:
    """General allocation requests (several providers or groups each)."""
    wrapped: dict[int, ProviderResources] = {}  # inner dicts are often shared: wrap each once
    out = []
    for ar in found:
        allocations = {}
        for rp, resources in ar.allocations.items():
            part = wrapped.get(id(resources))
            if part is None:
                part = wrapped[id(resources)] = ProviderResources(resources)
            allocations[rp] = part
        out.append(AllocationRequest(allocations, ar.mappings) if mv >= (1, 34) else AllocationRequest(allocations))
    return out


class CandidatesView:
    """Converts engine results to typed ``Candidates``, with the memos above.
    Thread-safe: entries are immutable and a lost race only converts twice
    (the counts that bound the memos are approximate under races)."""

    def __init__(self) -> None:
        # Per summary shape: id of an engine summary -> (that summary, typed).
        # The entry holds the engine's object, so its id cannot be reused by
        # another while the entry exists: a hit by id is a hit on the object.
        self._summaries: dict[tuple[int, int], dict[int, tuple[engine.EngineSummary, ProviderSummary]]] = {}
        self._summary_ids: dict[tuple[str, tuple[int, int]], int] = {}  # provider, shape -> its entry
        self._single: dict[tuple, dict[str, AllocationRequest]] = {}
        self._single_count = 0
        self._lock = threading.Lock()

    def candidates(self, result: engine.CandidateResult, mv: tuple[int, int], version: str) -> Candidates:
        found = result.allocation_requests
        typed = (self._single_requests(found, mv) if isinstance(found, engine.SingleProviderRequests)
                 else requests(found, mv))
        return Candidates(typed, self._summaries_of(result.provider_summaries, mv), version)

    def _summaries_of(self, found: list[engine.EngineSummary], mv: tuple[int, int]) -> dict[str, ProviderSummary]:
        shape = (1, 29) if mv >= (1, 29) else (1, 17) if mv >= (1, 17) else (1, 0)
        memo = self._summaries.get(shape)
        if memo is None or len(self._summary_ids) + len(found) > _MAX_SUMMARIES:
            with self._lock:
                if len(self._summary_ids) + len(found) > _MAX_SUMMARIES:
                    self._summaries, self._summary_ids = {}, {}
                memo = self._summaries.setdefault(shape, {})
        # The common case, every summary unchanged, without a Python-level loop.
        hits = list(map(memo.get, map(id, found)))
        uuids = map(_uuid, found)
        if None not in hits:
            return dict(zip(uuids, map(_typed, hits)))
        out = {}
        ids = self._summary_ids
        for s, uuid, hit in zip(found, uuids, hits):
            if hit is None:
                hit = (s, summary(s, mv))
                old = ids.get((uuid, shape))
                if old is not None:
                    memo.pop(old, None)
                memo[id(s)] = hit
                ids[(uuid, shape)] = id(s)
            out[uuid] = hit[1]
        return out

    def _single_requests(self, found: engine.SingleProviderRequests, mv: tuple[int, int]) -> list[AllocationRequest]:
        with_mappings = mv >= (1, 34)
        key = (found.suffix, tuple(found.resources.items()), with_mappings)
        memo = self._single.get(key)
        if memo is None or self._single_count > _MAX_REQUESTS:
            with self._lock:
                if self._single_count > _MAX_REQUESTS:
                    self._single, self._single_count = {}, 0
                memo = self._single.setdefault(key, {})
        out = list(map(memo.get, found.providers))
        if None not in out:
            return out
        part = ProviderResources(dict(found.resources))
        for i, rp in enumerate(found.providers):
            if out[i] is None:
                out[i] = memo[rp] = (AllocationRequest({rp: part}, {found.suffix: [rp]}) if with_mappings
                                     else AllocationRequest({rp: part}))
                self._single_count += 1
        return out
