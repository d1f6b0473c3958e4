"""``GET /allocation_candidates`` (docs/design/allocation-candidates.md): parse
and validate the query string in the order of #validation-order there, hand a
typed request to the candidates engine, and shape its answer for the
negotiated microversion (#answer).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson
from orjson import Fragment
from sqlalchemy import Connection

from billeting.placement import candidates, errors, metrics
from billeting.placement.api import query, util
from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import queries as query_schemas
from billeting.placement.candidates import names
from billeting.common import gcpause
from billeting.placement.store.tx import run_read

GROUP_BASES = ("resources", "required", "member_of", "in_tree")
_BASE_SINCE = {"resources": (1, 10), "required": (1, 17), "member_of": (1, 21), "in_tree": (1, 31)}
_NUMERIC_SUFFIX = "[1-9][0-9]*"
_STRING_SUFFIX = "[a-zA-Z0-9_-]{1,64}"
_FIRST_WINS = ("limit", "group_policy")


def _bad(detail: str, code: str | None = None) -> HTTPProblem:
    return HTTPProblem(400, detail, code=code)


def _invalid(detail: str) -> HTTPProblem:
    return _bad(f"Invalid query string parameters: {detail}")


# --- step 1: the query schema ----------------------------------------------------

def _suffix_pattern(mv: tuple[int, int]) -> str | None:
    if mv < (1, 25):
        return None
    return _STRING_SUFFIX if mv >= (1, 33) else _NUMERIC_SUFFIX


def _split_key(key: str, mv: tuple[int, int]) -> tuple[str, str] | None:
    """(base, suffix) of a group parameter allowed at ``mv``, else None."""
    pattern = _suffix_pattern(mv)
    for base in GROUP_BASES:
        if not key.startswith(base) or mv < _BASE_SINCE[base]:
            continue
        suffix = key[len(base):]
        if suffix == "" or (pattern is not None and re.fullmatch(pattern, suffix)):
            return base, suffix
    return None


def _check_schema(pairs: list[tuple[str, str]], mv: tuple[int, int]) -> None:
    schema = query_schemas.candidates(mv)
    last = util.query_last(pairs)
    util.validate_query(last, schema)
    # Quirk docs/design/placement-quirks.md#q3: the first occurrence is used, but every one must be valid,
    # and is reported as if it were the only one.
    for key, value in pairs:
        if key in _FIRST_WINS and value != last[key]:
            util.validate_query({**last, key: value}, schema)


# --- steps 2-7: parse and check the structure ----------------------------------

@dataclass(slots=True)
class ParsedGroup:
    suffix: str
    keys: set[str] = field(default_factory=set)  # bases present
    resources: dict[str, int] = field(default_factory=dict)
    traits: query.TraitExpr = field(default_factory=query.TraitExpr)
    member_of: query.MemberOfExpr = field(default_factory=query.MemberOfExpr)
    in_tree: str | None = None


@dataclass(slots=True)
class ParsedQuery:
    groups: list[ParsedGroup]
    limit: int | None = None
    group_policy: str | None = None
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    same_subtree: list[frozenset[str]] = field(default_factory=list)


def _parse_root_required(values: list[str]) -> tuple[set[str], set[str]]:
    if len(values) > 1:
        raise _bad("Query parameter 'root_required' may be specified only once.",
                   errors.QUERY_DUPLICATE_KEY)
    if not values:
        return set(), set()
    # Parsed as a 'required' value, but never in the 'in:' form.
    expr = query.parse_trait_value(values[0], allow_forbidden=True, allow_any_of=False)
    required = set().union(*expr.required)
    conflict = required & expr.forbidden
    if conflict:
        raise _bad("Conflicting required and forbidden traits found in root_required: "
                   + ", ".join(sorted(conflict)), errors.QUERY_BAD_VALUE)
    return required, expr.forbidden


def _parse_same_subtree(values: list[str]) -> list[frozenset[str]]:
    found = []
    for value in values:
        suffixes = {part.strip() for part in value.split(",")}
        if "" in suffixes:
            raise _bad("Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                       errors.QUERY_BAD_VALUE)
        found.append(frozenset(suffixes))
    return found


def _parse_groups(pairs: list[tuple[str, str]], mv: tuple[int, int]) -> list[ParsedGroup]:
    values: dict[tuple[str, str], list[str]] = {}
    for key, value in pairs:
        split = _split_key(key, mv)
        if split is not None:
            values.setdefault(split, []).append(value)
    suffixes = sorted({suffix for _, suffix in values})
    groups = []
    for suffix in suffixes:
        group = ParsedGroup(suffix)
        for base in GROUP_BASES:
            given = values.get((base, suffix))
            if given is None:
                continue
            group.keys.add(base)
            if base == "resources":
                group.resources = query.parse_resources(given[-1])
            elif base == "required":
                group.traits = query.parse_required(given, mv)
            elif base == "member_of":
                group.member_of = query.parse_member_of(given, mv, suffix)
            else:
                in_tree = given[-1].strip()
                if not util.is_uuid_like(in_tree):
                    raise _invalid("Expected 'in_tree' parameter to be a format of uuid. "
                                   f"Got: {given[-1]}")
                group.in_tree = in_tree
        groups.append(group)
    return groups


def _check_structure(parsed: ParsedQuery, mv: tuple[int, int]) -> None:
    groups = parsed.groups
    if mv < (1, 36):
        orphans = [g for g in groups if "resources" not in g.keys]
        traits = [f"required{g.suffix}" for g in orphans if "required" in g.keys]
        if traits:
            raise _bad("All traits parameters must be associated with resources.  "
                       f"Found the following orphaned traits keys: {', '.join(sorted(traits))}")
        members = [f"member_of{g.suffix}" for g in orphans if "member_of" in g.keys]
        if members:
            raise _bad("All member_of parameters must be associated with resources. "
                       f"Found the following orphaned member_of keys: {', '.join(sorted(members))}")
        if orphans:
            raise _bad("All request groups must specify resources.")
        if not groups:
            raise _bad("At least one request group (`resources` or `resources{$S}`) is required.")
        return
    if not any("resources" in g.keys for g in groups):
        raise _bad("There must be at least one resources or resources[$S] parameter.",
                   errors.QUERY_MISSING_VALUE)
    in_subtree = set().union(*parsed.same_subtree) if parsed.same_subtree else set()
    bad = sorted(g.suffix for g in groups if "resources" not in g.keys and g.suffix not in in_subtree)
    if bad:
        raise _bad("Resourceless suffixed group request should be specified in `same_subtree` "
                   f"query param: bad group(s) - {bad}.", errors.QUERY_BAD_VALUE)
    known = sorted(g.suffix for g in groups)
    unknown = sorted(in_subtree - set(known))
    if unknown:
        raise _bad(f"Real suffixes should be specified in `same_subtree`: {unknown} not found in {known}.",
                   errors.QUERY_BAD_VALUE)


def _check_conflicts(parsed: ParsedQuery, mv: tuple[int, int]) -> None:
    if mv < (1, 22):
        return
    found = []
    for group in parsed.groups:
        forbidden = group.traits.forbidden
        clashing = set()
        for any_of in group.traits.required:
            if any_of <= forbidden:
                clashing |= any_of
        if clashing:
            found.append(f"required{group.suffix}: ({', '.join(sorted(clashing))})")
    if found:
        raise _bad("Conflicting required and forbidden traits found in the following traits keys: "
                   + ", ".join(found))


def parse(req) -> ParsedQuery:
    mv = req.context.mv
    pairs = util.query_pairs(req)
    _check_schema(pairs, mv)                                           # step 1
    parsed = ParsedQuery(groups=[])
    limits = util.query_all(pairs, "limit")
    policies = util.query_all(pairs, "group_policy")
    parsed.limit = int(limits[0]) if limits else None
    parsed.group_policy = policies[0] if policies else None
    parsed.root_required, parsed.root_forbidden = _parse_root_required(
        util.query_all(pairs, "root_required"))                        # step 2
    parsed.same_subtree = _parse_same_subtree(util.query_all(pairs, "same_subtree"))  # step 3
    parsed.groups = _parse_groups(pairs, mv)                           # step 4
    check(parsed, mv)                                                  # steps 5-7
    return parsed


def check(parsed: ParsedQuery, mv: tuple[int, int]) -> None:
    """Steps 5-7: the structure of a parsed query. Also run by in-process
    clients that build a ``ParsedQuery`` without a query string."""
    _check_structure(parsed, mv)                                       # step 5
    _check_conflicts(parsed, mv)                                       # step 6
    suffixed = [g for g in parsed.groups if g.suffix]
    if len(suffixed) > 1 and parsed.group_policy is None:              # step 7
        raise _bad('The "group_policy" parameter is required when specifying more than one '
                   '"resources{N}" parameter.')


# --- step 8: resolve names into the engine's typed request ----------------------

def resolve(conn: Connection, parsed: ParsedQuery, mv: tuple[int, int], settings) -> candidates.CandidateRequest:
    rc_wanted = [name for g in parsed.groups for name in g.resources]
    rc_ids = names.rc_ids(conn, rc_wanted)
    for name in rc_wanted:
        if name not in rc_ids:
            raise _bad(f"Invalid resource class in resources parameter: No such resource class {name}.")
    trait_wanted = set(parsed.root_required) | parsed.root_forbidden
    for g in parsed.groups:
        trait_wanted |= g.traits.names()
    trait_ids = names.trait_ids(conn, trait_wanted)
    unknown = sorted(trait_wanted - trait_ids.keys())
    if unknown:
        raise _bad(f"No such trait(s): {', '.join(unknown)}.")
    groups = tuple(
        candidates.ResolvedGroup(
            suffix=g.suffix,
            resources={rc_ids[name]: amount for name, amount in g.resources.items()},
            required=tuple(frozenset(trait_ids[n] for n in any_of) for any_of in g.traits.required),
            forbidden=frozenset(trait_ids[n] for n in g.traits.forbidden),
            member_of=tuple(frozenset(any_of) for any_of in g.member_of.required),
            forbidden_aggregates=frozenset(g.member_of.forbidden),
            in_tree=g.in_tree,
        )
        for g in parsed.groups)
    return candidates.CandidateRequest(
        groups=groups,
        limit=parsed.limit,
        group_policy=parsed.group_policy,
        root_required=frozenset(trait_ids[n] for n in parsed.root_required),
        root_forbidden=frozenset(trait_ids[n] for n in parsed.root_forbidden),
        same_subtree=tuple(parsed.same_subtree),
        nested_aware=mv >= (1, 29),
        summary_all_classes=mv >= (1, 27),
        summary_traits=mv >= (1, 17),
        randomize=settings.randomize_allocation_candidates,
        max_candidates=settings.max_allocation_candidates,
        breadth_first=settings.allocation_candidates_generation_strategy == "breadth-first",
    )


# --- response --------------------------------------------------------------------

def _render_requests(requests, mv: tuple[int, int]) -> list:
    if isinstance(requests, candidates.SingleProviderRequests):
        return _render_single(requests, mv)
    if mv < (1, 12):
        return [{"allocations": [{"resource_provider": {"uuid": uuid}, "resources": resources}
                                 for uuid, resources in ar.allocations.items()]}
                for ar in requests]
    if mv < (1, 34):
        return [{"allocations": {uuid: {"resources": resources} for uuid, resources in ar.allocations.items()}}
                for ar in requests]
    return [{"allocations": {uuid: {"resources": resources} for uuid, resources in ar.allocations.items()},
             "mappings": ar.mappings}
            for ar in requests]


def _render_single(requests: candidates.SingleProviderRequests, mv: tuple[int, int]):
    """Every request takes the same resources from one provider: written out
    as one JSON fragment from a template (provider uuids, class names and
    group suffixes need no escaping beyond what orjson gives the suffix)."""
    resources = orjson.dumps(requests.resources).decode()
    providers = requests.providers
    if mv < (1, 12):
        head, tail = '{"allocations":[{"resource_provider":{"uuid":"', '"},"resources":' + resources + "}]}"
        return Fragment("[" + ",".join([f"{head}{uuid}{tail}" for uuid in providers]) + "]")
    head, tail = '{"allocations":{"', '":{"resources":' + resources + "}}"
    if mv < (1, 34):
        tail += "}"
        return Fragment("[" + ",".join([f"{head}{uuid}{tail}" for uuid in providers]) + "]")
    middle, end = tail + ',"mappings":{' + orjson.dumps(requests.suffix).decode() + ':["', '"]}}'
    return Fragment("[" + ",".join([f"{head}{uuid}{middle}{uuid}{end}" for uuid in providers]) + "]")


def _summary_shape(mv: tuple[int, int]) -> int:
    return 29 if mv >= (1, 29) else 17 if mv >= (1, 17) else 0


def _wire_summary(s: candidates.EngineSummary, shape: int) -> Fragment:
    memo = s.wire
    if memo is None or memo[0] != shape:
        if shape == 29:
            body = {"resources": s.resources, "traits": s.traits,
                    "parent_provider_uuid": s.parent_uuid, "root_provider_uuid": s.root_uuid}
        elif shape == 17:
            body = {"resources": s.resources, "traits": s.traits}
        else:
            body = {"resources": s.resources}
        # (decoded: orjson's bytes keep a buffer of at least 1 KB, a str is exact)
        memo = s.wire = (shape, Fragment(orjson.dumps(body).decode()))
    return memo[1]


def render(result: candidates.CandidateResult, mv: tuple[int, int]) -> dict:
    """The answer in the shape of ``mv``: plain dicts and lists, with parts
    already serialized as JSON fragments."""
    requests = _render_requests(result.allocation_requests, mv)
    shape = _summary_shape(mv)
    summaries = {}
    for s in result.provider_summaries:
        # (the memo read inline: thousands of summaries, nearly all memoized)
        memo = s.wire
        summaries[s.uuid] = memo[1] if memo is not None and memo[0] == shape else _wire_summary(s, shape)
    return {"allocation_requests": requests, "provider_summaries": summaries}


class AllocationCandidates(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp) -> None:
        util.require_version(req, (1, 10))
        util.require_accept_json(req)
        util.authorize(req, "placement:allocation_candidates:list")
        mv = req.context.mv
        parsed = parse(req)
        settings = self.settings

        def work(conn: Connection) -> candidates.CandidateResult:
            return candidates.find(conn, resolve(conn, parsed, mv, settings))

        with gcpause.paused():
            result = run_read(self.engine, work)
            metrics.observe_candidates(len(result))
            util.send_json(req, resp, render(result, mv))
            # Free the answer's objects before collection resumes, so that no
            # collection has to walk them.
            del result
