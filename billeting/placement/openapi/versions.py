"""How the document says "this exists only in microversions X to Y".

One extension, ``x-openstack-microversions: {"min": "1.14", "max": "1.39"}``,
may sit on a schema that is one alternative of an ``anyOf``, on a parameter,
a request body, a response or an operation. A shape that changed over time
is an ``anyOf`` whose alternatives each carry their range; the ranges of one
``anyOf`` never overlap. ``anyOf`` rather than ``oneOf``: two versions'
shapes can both fit one document (an empty list fits every version's list),
and ``oneOf`` would then reject a correct answer.

``for_version(document, mv)`` resolves every such choice for one
microversion (the view the fuzz tests check responses against); an
operation outside its range stays, because the route then answers 404.
"""
from __future__ import annotations

import copy
from collections.abc import Callable

from billeting.placement.api.microversion import MAX_VERSION, MIN_VERSION, to_str

RANGE = "x-openstack-microversions"
Version = tuple[int, int]

ALL_VERSIONS: tuple[Version, ...] = tuple((1, minor) for minor in range(MIN_VERSION[1], MAX_VERSION[1] + 1))


def parse(text: str) -> Version:
    major, minor = text.split(".")
    return int(major), int(minor)


def span(low: Version, high: Version = MAX_VERSION) -> dict:
    return {"min": to_str(low), "max": to_str(high)}


def since(low: Version) -> dict:
    """The extension for something that exists from ``low`` on."""
    return {RANGE: span(low)}


def by_version(make: Callable[[Version], dict | None], start: Version = MIN_VERSION) -> dict:
    """One schema for ``make(mv)`` over every microversion from ``start``:
    consecutive versions with equal schemas share one alternative, and
    ``None`` (no such thing at that version) leaves a gap. A schema that never
    changed comes back as it is."""
    groups: list[list] = []  # [low, high, schema]
    for mv in ALL_VERSIONS:
        if mv < start:
            continue
        schema = make(mv)
        if groups and groups[-1][2] == schema and groups[-1][1] == (mv[0], mv[1] - 1):
            groups[-1][1] = mv
        else:
            groups.append([mv, mv, schema])
    groups = [g for g in groups if g[2] is not None]
    if len(groups) == 1 and groups[0][0] == start and groups[0][1] == MAX_VERSION:
        return copy.deepcopy(groups[0][2])
    return {"anyOf": [{**copy.deepcopy(schema), RANGE: span(low, high)} for low, high, schema in groups]}


def applies(node: dict, mv: Version) -> bool:
    found = node.get(RANGE)
    return found is None or parse(found["min"]) <= mv <= parse(found["max"])


def for_version(document: dict, mv: Version) -> dict:
    """The document as one microversion sees it: alternatives, parameters, request
    bodies and responses outside ``mv`` removed, single alternatives unwrapped."""

    def walk(node):
        if isinstance(node, list):
            return [walk(item) for item in node if not (isinstance(item, dict) and not applies(item, mv))]
        if not isinstance(node, dict):
            return node
        out = {}
        for name, value in node.items():
            if name == "responses":
                out[name] = {status: walk(r) for status, r in value.items() if applies(r, mv)}
            elif name == "requestBody" and not applies(value, mv):
                continue
            else:  # (operations are never removed: out of range they answer 404)
                out[name] = walk(value)
        alternatives = node.get("anyOf")
        if alternatives and any(isinstance(a, dict) and RANGE in a for a in alternatives):
            kept = out.pop("anyOf")
            if len(kept) == 1:
                member = {k: v for k, v in kept[0].items() if k != RANGE}
                return {**member, **out}
            if kept:
                out["anyOf"] = kept
        return out

    resolved = walk(document)
    resolved["info"] = {**resolved["info"], "x-openstack-microversion": to_str(mv)}
    return resolved
