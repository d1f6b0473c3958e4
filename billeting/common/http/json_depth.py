"""How deeply a JSON body may nest, the same for every HTTP API.

The validators (jsonschema), the NUL search and the error messages
(``orjson.dumps`` of the offending part) all recurse, so a body nested a few
hundred levels deep would exhaust Python's recursion limit and end as a 500,
after spending up to a second in the validator. The deepest body any API
takes, a reshape (the body, ``allocations``, a consumer, its
``allocations``, a provider, its ``resources``), nests 6 objects deep; 64
leaves room for any future schema.
"""
from __future__ import annotations

from itertools import compress

MAX_JSON_DEPTH = 64

TOO_DEEP = f"JSON nested more than {MAX_JSON_DEPTH} levels deep is not accepted."

_is_container = frozenset((dict, list)).__contains__


def too_deep(raw: bytes, document: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Does ``document`` (parsed from ``raw`` by orjson) nest deeper than
    ``limit``? A scalar is depth 0, ``[]`` and ``{}`` depth 1.

    Breadth-first, one level at a time, with the per-value work in C
    (``compress``/``map``); it stops at ``limit + 1`` levels, so a deep
    body costs next to nothing, and a body with fewer brackets than
    ``limit`` is not walked at all."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    level = [document] if _is_container(type(document)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list = []
        add = below.extend
        for container in level:
            values = container.values() if type(container) is dict else container
            add(compress(values, map(_is_container, map(type, values))))
        level = below
    return False
