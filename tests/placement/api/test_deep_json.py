"""A JSON body nested deeper than MAX_JSON_DEPTH is a 400 with a code on
every Placement route that takes one, never a 500 from the recursion limit
(the validator, the NUL search); a body at the limit is judged as usual."""
from __future__ import annotations

import pytest

from billeting.common.http.json_depth import MAX_JSON_DEPTH
from tests.placement.api.test_reshaper import SERVICE, consumer_entry, move_vcpu_body, reshape, tree  # noqa: F401

ADMIN_MV = "1.39"


def nested(depth: int, inner: bytes = b"1") -> bytes:
    return b"[" * depth + inner + b"]" * depth


def _routes(rp: str) -> list[tuple[str, str, bytes]]:
    # Each body nests ``{depth}`` arrays inside an otherwise plausible document.
    return [
        ("POST", "/resource_providers", b'{"name": %s}'),
        ("PUT", f"/resource_providers/{rp}/inventories",
         b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": %s}}}'),
        ("PUT", f"/resource_providers/{rp}/traits", b'{"resource_provider_generation": 0, "traits": %s}'),
        ("POST", "/allocations", b'{"c": {"allocations": %s}}'),
        ("POST", "/reshaper", b'{"inventories": {}, "allocations": %s}'),
        ("PUT", "/resource_providers/" + rp, b"%s"),
    ]


@pytest.mark.parametrize("depth", [255, 300, 1024, 10000])
@pytest.mark.parametrize("inner", [b"1", b'"a\\u0000b"'])  # a NUL sends it to the (recursive) NUL search too
def test_a_deeply_nested_body_is_a_400_with_a_code(client, create_provider, depth, inner):
    rp = create_provider("deep")["uuid"]
    for method, path, template in _routes(rp):
        resp = client.request(method, path, body=template % nested(depth, inner), mv=ADMIN_MV,
                              headers=SERVICE, content_type="application/json")
        assert resp.status == 400, (method, path, resp)
        err = resp.error
        assert err["code"] == "placement.undefined_code", (method, path, err)
        if depth < 1024:  # deeper, orjson itself refuses it first
            assert f"more than {MAX_JSON_DEPTH} levels deep" in err["detail"], (method, path, err)


def test_a_body_at_the_limit_is_validated_as_usual(client, create_provider):
    rp = create_provider("edge")["uuid"]
    # The name nests MAX_JSON_DEPTH - 1 arrays inside the body's object: the
    # schema refuses it (a name is a string), the depth check does not.
    resp = client.post("/resource_providers", body=b'{"name": %s}' % nested(MAX_JSON_DEPTH - 1), mv=ADMIN_MV,
                       content_type="application/json")
    assert resp.status == 400 and "levels deep" not in resp.error["detail"], resp
    resp = client.post("/resource_providers", body=b'{"name": %s}' % nested(MAX_JSON_DEPTH), mv=ADMIN_MV,
                       content_type="application/json")
    assert resp.status == 400 and "levels deep" in resp.error["detail"], resp


def test_the_deepest_legitimate_body_a_reshape_still_works(client, tree):  # noqa: F811 - the fixture
    root, child, instance = tree
    assert reshape(client, move_vcpu_body(client, root, child, instance)).status == 204
