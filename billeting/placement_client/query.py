"""Render a typed candidates query as Placement query parameters.

The parameters come out sorted by name, then value (docs/design/request-translation.md#translation
step 12), so the same query always gives the same string — it appears in
logs and in "no valid host" explanations, and tests compare it verbatim.
Each feature is checked against the microversion the query is sent at: a
query that needs more than the Placement offers fails here with the name of
the feature, not with a 400 from the server.
"""
from __future__ import annotations

import re
from urllib.parse import quote

from billeting.placement_client.model import CandidateQuery, RequestGroup

_NUMERIC_SUFFIX = re.compile(r"[1-9][0-9]*\Z")
_STRING_SUFFIX = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")


class UnsupportedQuery(ValueError):
    """The query needs a feature the negotiated microversion lacks."""

    def __init__(self, feature: str, needed: tuple[int, int], have: tuple[int, int]) -> None:
        super().__init__(f"{feature} needs Placement microversion {needed[0]}.{needed[1]}, "
                         f"but it offers {have[0]}.{have[1]}")
        self.feature = feature
        self.needed = needed


def _need(feature: str, needed: tuple[int, int], have: tuple[int, int]) -> None:
    if have < needed:
        raise UnsupportedQuery(feature, needed, have)


def _trait_values(group: RequestGroup, mv: tuple[int, int]) -> list[str]:
    """The ``required{S}`` values: plain required and forbidden traits in one
    value, each any-of set of two or more in an ``in:`` value of its own."""
    plain = sorted(next(iter(any_of)) for any_of in group.required if len(any_of) == 1)
    forbidden = sorted(group.forbidden)
    if forbidden:
        _need("forbidden traits", (1, 22), mv)
    values = []
    if plain or forbidden:
        values.append(",".join(plain + [f"!{t}" for t in forbidden]))
    for any_of in group.required:
        if len(any_of) > 1:
            _need("any-of traits (required=in:)", (1, 39), mv)
            values.append("in:" + ",".join(sorted(any_of)))
    return values


def _group_params(group: RequestGroup, mv: tuple[int, int]) -> list[tuple[str, str]]:
    s = group.suffix
    if s:
        if _NUMERIC_SUFFIX.match(s):
            _need("numbered request groups", (1, 25), mv)
        elif _STRING_SUFFIX.match(s):
            _need("named request groups", (1, 33), mv)
        else:
            raise ValueError(f"invalid request group suffix {s!r}")
    params: list[tuple[str, str]] = []
    if group.resources:
        params.append((f"resources{s}", ",".join(f"{rc}:{n}" for rc, n in sorted(group.resources.items()))))
    elif mv < (1, 36):
        raise UnsupportedQuery("request groups without resources", (1, 36), mv)
    for value in _trait_values(group, mv):
        _need("required traits", (1, 17), mv)
        params.append((f"required{s}", value))
    for any_of in group.member_of:
        _need("member_of", (1, 21), mv)
        params.append((f"member_of{s}", "in:" + ",".join(sorted(any_of))))
    if group.in_tree:
        _need("in_tree", (1, 31), mv)
        params.append((f"in_tree{s}", group.in_tree))
    if group.forbidden_aggregates:
        _need("forbidden aggregates (member_of=!in:)", (1, 32), mv)
        params.append((f"member_of{s}", "!in:" + ",".join(sorted(group.forbidden_aggregates))))
    return params


def params(query: CandidateQuery, mv: tuple[int, int]) -> list[tuple[str, str]]:
    """The query's parameters at microversion ``mv``, sorted."""
    found: list[tuple[str, str]] = []
    if query.limit is not None:
        _need("limit", (1, 16), mv)
        found.append(("limit", str(query.limit)))
    if query.group_policy is not None:
        found.append(("group_policy", query.group_policy))
    if query.root_required or query.root_forbidden:
        _need("root_required", (1, 35), mv)
        found.append(("root_required", ",".join(
            sorted(query.root_required) + [f"!{t}" for t in sorted(query.root_forbidden)])))
    for suffixes in query.same_subtree:
        _need("same_subtree", (1, 36), mv)
        found.append(("same_subtree", ",".join(sorted(suffixes))))
    for group in query.groups:
        found.extend(_group_params(group, mv))
    return sorted(found)


def query_string(query: CandidateQuery, mv: tuple[int, int]) -> str:
    """``key=value&...`` with values percent-encoded except the characters
    Placement's syntax uses (``:``, ``,``, ``!``)."""
    return "&".join(f"{k}={quote(v, safe=':,!')}" for k, v in params(query, mv))
