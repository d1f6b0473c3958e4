"""The depth limit every API applies to JSON bodies (billeting.common.http.json_depth)."""
from __future__ import annotations

import orjson
import pytest

from billeting.common.http.json_depth import MAX_JSON_DEPTH, too_deep


def _check(raw: bytes) -> bool:
    return too_deep(raw, orjson.loads(raw))


@pytest.mark.parametrize("raw", [b"1", b'"[[[["', b"[]", b"{}", b'{"a": [{"b": [1, {}]}]}'])
def test_shallow_documents_pass(raw):
    assert not _check(raw)


def test_the_limit_is_exact_for_arrays_objects_and_a_mix():
    for depth in (MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1):
        arrays = b"[" * depth + b"]" * depth
        objects = b'{"k":' * (depth - 1) + b"{}" + b"}" * (depth - 1)
        pairs, inner = ((depth - 1) // 2, b"[]") if depth % 2 else (depth // 2 - 1, b"[{}]")
        mixed = b'[{"k":' * pairs + inner + b"}]" * pairs
        for raw in (arrays, objects, mixed):
            assert _check(raw) is (depth > MAX_JSON_DEPTH), (depth, raw[:20])


def test_one_deep_branch_among_many_shallow_ones_is_found():
    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    assert _check(b'{"a": [' + b",".join([b"[1]"] * 1000 + [deep]) + b"]}")


def test_brackets_inside_strings_do_not_count():
    raw = orjson.dumps({"name": "[" * 500, "more": ["{" * 500]})
    assert not _check(raw)
