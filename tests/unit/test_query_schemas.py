"""The quick reading of query schemas never accepts what the validator
rejects (it only saves the validator's time on valid queries)."""
from __future__ import annotations

import itertools

import pytest

from billeting.common.http import util
from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.schemas import queries

UUID = "0e1c1c3e-2d4f-4f3e-9d8c-3d2c1b0a9f8e"
VERSIONS = [(1, minor) for minor in range(0, 40)]
SCHEMAS = {id(s): s for mv in VERSIONS for s in (
    queries.providers_list(mv), queries.candidates(mv) if mv >= (1, 10) else None,
    queries.usages(mv), queries.TRAITS_LIST) if s is not None}
KEYS = ["name", "uuid", "in_tree", "member_of", "resources", "required", "limit", "group_policy",
        "root_required", "same_subtree", "resources1", "required_NET", "member_of-x", "in_tree7",
        "resources01", "project_id", "user_id", "consumer_type", "associated", "colour", "resources" + "x" * 70]
VALUES = ["", "x", UUID, UUID.replace("-", ""), "10", "0", "none", "isolate", "ALL", "allfoo", "unknown",
          "CUSTOM_A", "1\n", "x" * 300]


def validator_accepts(params: dict, schema: dict) -> bool:
    try:
        util.validate(params, schema, prefix="")
    except HTTPProblem:
        return False
    return True


@pytest.mark.parametrize("schema", list(SCHEMAS.values()), ids=lambda s: str(sorted(s["properties"]))[:60])
def test_quick_reading_only_accepts_what_the_validator_accepts(schema):
    checked = 0
    for keys in itertools.chain(itertools.combinations(KEYS, 1), itertools.combinations(KEYS[:10], 2)):
        for value in VALUES:
            params = {key: value for key in keys}
            if util._query_surely_valid(params, schema):
                assert validator_accepts(params, schema), params
                checked += 1
    assert checked > 0


def test_a_failure_is_reported_by_the_validator():
    with pytest.raises(HTTPProblem) as exc:
        util.validate_query({"limit": "0", "resources": "VCPU:1"}, queries.candidates((1, 39)))
    assert exc.value.detail.startswith("Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'")
