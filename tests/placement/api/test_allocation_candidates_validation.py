"""Bad query strings for GET /allocation_candidates: always a 400 with the
upstream's detail (and code from 1.23), never a 500; checks run in the order of
docs/design/allocation-candidates.md#validation-order."""
from __future__ import annotations

import pytest

from tests.placement.api.test_allocation_candidates_fleet import AGG, Fleet

AC = "/allocation_candidates"
UUID = "a1f5c0de-0000-4000-8000-0000000000aa"
RES = "Badly formed resources parameter. Expected resources query string parameter in form: " \
      "?resources=VCPU:2,MEMORY_MB:1024. Got: "


@pytest.fixture(autouse=True)
def one_host(client):
    fleet = Fleet(client)
    fleet.provider("h", inventory={"VCPU": 4})
    return fleet


def bad(client, query: str, mv: str = "1.39", code: str | None = "placement.undefined_code") -> str:
    resp = client.get(f"{AC}?{query}", mv=mv)
    assert resp.status == 400, resp
    err = resp.error
    assert err["title"] == "Bad Request"
    if mv >= "1.23" and len(mv) == 4 and code is not None:
        assert err["code"] == code
    return err["detail"]


@pytest.mark.parametrize("query,mv,detail", [
    # step 1: the whitelist of the microversion, limit and group_policy values
    ("resources=VCPU:1&foo=1", "1.24", "Invalid query string parameters: Additional properties are not allowed "
                                       "('foo' was unexpected)"),
    ("resources=VCPU:1&foo=1", "1.39", "Invalid query string parameters: 'foo' does not match any of the regexes"),
    ("limit=2", "1.16", "Invalid query string parameters: 'resources' is a required property"),
    ("resources01=VCPU:1", "1.25", "does not match any of the regexes"),
    ("resources_NET=VCPU:1", "1.32", "does not match any of the regexes"),
    ("resources" + "x" * 65 + "=VCPU:1", "1.33", "does not match any of the regexes"),
    ("resources_a.b=VCPU:1", "1.39", "does not match any of the regexes"),
    ("resources=VCPU:1&limit=0", "1.39", "Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'"),
    ("resources=VCPU:1&limit=-1", "1.39", "'-1' does not match '^[1-9][0-9]*$'"),
    ("resources=VCPU:1&limit=abc", "1.39", "'abc' does not match"),
    ("resources=VCPU:1&limit=1.5", "1.39", "'1.5' does not match"),
    ("resources=VCPU:1&limit=", "1.39", "'' does not match"),
    ("resources=VCPU:1&limit=x&limit=2", "1.39", "'x' does not match"),
    ("resources=VCPU:1&limit=2&limit=x", "1.39", "'x' does not match"),
    ("resources=VCPU:1&group_policy=bogus", "1.39",
     "Invalid query string parameters: 'bogus' is not one of ['none', 'isolate']"),
    ("resources=VCPU:1&group_policy=none&group_policy=bogus", "1.39", "'bogus' is not one of"),
    # step 4: group syntax
    ("resources=", "1.39", RES + "empty string."),
    ("resources=VCPU", "1.39", RES + "VCPU."),
    ("resources=VCPU:1,", "1.39", RES + "."),
    ("resources=VCPU:1:2", "1.39", RES + "VCPU:1:2."),
    ("resources=VCPU:x", "1.39", "Requested resource VCPU expected positive integer amount. Got: x."),
    ("resources=VCPU:0", "1.39", "Requested resource VCPU requires amount >= 1. Got: 0."),
    ("resources=VCPU:-2", "1.39", "Requested resource VCPU requires amount >= 1. Got: -2."),
    ("resources=VCPU:1&required=", "1.39", "Expected 'required' parameter value of the form: "
                                           "HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: "),
    ("resources=VCPU:1&required=A,,B", "1.39", "Got an empty trait in: A,,B"),
    ("resources=VCPU:1&required=!HW_CPU_X86_AVX2", "1.21",
     "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !HW_CPU_X86_AVX2"),
    ("resources=VCPU:1&required=in:HW_CPU_X86_AVX2", "1.38",
     "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. "
     "Got: in:HW_CPU_X86_AVX2"),
    ("resources=VCPU:1&required=in:HW_CPU_X86_AVX2,!HW_CPU_X86_SSE2", "1.39", "does not support forbidden traits"),
    ("resources=VCPU:1&member_of=nope", "1.39",
     "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: nope"),
    (f"resources=VCPU:1&member_of={AGG},{UUID}", "1.39",
     "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword"),
    ("resources=VCPU:1&member_of=in:", "1.39", "to contain valid UUID(s). Got: "),
    (f"resources=VCPU:1&member_of={AGG}&member_of={UUID}", "1.23", "Multiple member_of parameters are not supported"),
    (f"resources=VCPU:1&member_of=!{AGG}", "1.31",
     "Forbidden member_of parameters are not supported in the specified microversion"),
    ("resources=VCPU:1&in_tree=nope", "1.39",
     "Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: nope"),
    ("resources1=VCPU:1&in_tree1=", "1.39", "Expected 'in_tree' parameter to be a format of uuid. Got: "),
    # step 5 before 1.36: every group needs resources
    ("resources=VCPU:1&required1=HW_CPU_X86_AVX2", "1.25",
     "All traits parameters must be associated with resources.  Found the following orphaned traits keys: "
     "required1"),
    ("required=HW_CPU_X86_AVX2&required1=HW_CPU_X86_AVX2&resources2=VCPU:1", "1.25",
     "Found the following orphaned traits keys: required, required1"),
    (f"resources=VCPU:1&member_of1={AGG}", "1.25",
     "All member_of parameters must be associated with resources. Found the following orphaned member_of keys: "
     "member_of1"),
    (f"resources=VCPU:1&in_tree1={UUID}", "1.31", "All request groups must specify resources."),
    ("limit=1", "1.25", "At least one request group (`resources` or `resources{$S}`) is required."),
    ("", "1.35", "At least one request group (`resources` or `resources{$S}`) is required."),
    # step 6: a required trait that is also forbidden
    ("resources=VCPU:1&required=HW_CPU_X86_AVX2,!HW_CPU_X86_AVX2", "1.22",
     "Conflicting required and forbidden traits found in the following traits keys: "
     "required: (HW_CPU_X86_AVX2)"),
    ("resources1=VCPU:1&required1=HW_CPU_X86_SSE2,HW_CPU_X86_AVX2,!HW_CPU_X86_SSE2,!HW_CPU_X86_AVX2", "1.25",
     "traits keys: required1: (HW_CPU_X86_AVX2, HW_CPU_X86_SSE2)"),
    ("resources=VCPU:1&required=in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE2&required=!HW_CPU_X86_AVX2"
     "&required=!HW_CPU_X86_SSE2", "1.39",
     "traits keys: required: (HW_CPU_X86_AVX2, HW_CPU_X86_SSE2)"),
    # step 7: group_policy
    ("resources1=VCPU:1&resources2=VCPU:1", "1.25",
     'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.'),
    ("resources_A=VCPU:1&required_B=HW_NUMA_ROOT&same_subtree=_A,_B", "1.36",
     'The "group_policy" parameter is required'),
    # step 8: names
    ("resources=VCPU:1,CUSTOM_NOPE:1", "1.39",
     "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."),
    ("resources=vcpu:1", "1.39", "No such resource class vcpu."),
    ("resources=VCPU:1&required=CUSTOM_B,CUSTOM_A", "1.39", "No such trait(s): CUSTOM_A, CUSTOM_B."),
    ("resources=VCPU:1&required=!CUSTOM_NOPE", "1.39", "No such trait(s): CUSTOM_NOPE."),
    ("resources=VCPU:1&root_required=CUSTOM_NOPE", "1.39", "No such trait(s): CUSTOM_NOPE."),
    ("resources1=VCPU:1&required1=in:CUSTOM_NOPE,HW_CPU_X86_AVX2", "1.39", "No such trait(s): CUSTOM_NOPE."),
])
def test_bad_query(client, query, mv, detail):
    assert detail in bad(client, query, mv)


@pytest.mark.parametrize("query,code,detail", [
    ("resources=VCPU:1&root_required=HW_CPU_X86_AVX2&root_required=HW_CPU_X86_SSE2",
     "placement.query.duplicate_key", "Query parameter 'root_required' may be specified only once."),
    ("resources=VCPU:1&root_required=HW_CPU_X86_AVX2,!HW_CPU_X86_AVX2", "placement.query.bad_value",
     "Conflicting required and forbidden traits found in root_required: HW_CPU_X86_AVX2"),
    ("resources=VCPU:1&same_subtree=_A,", "placement.query.bad_value",
     "Empty string (unsuffixed group) can not be specified in `same_subtree` "),
    ("resources_A=VCPU:1&same_subtree=_A,_B", "placement.query.bad_value",
     "Real suffixes should be specified in `same_subtree`: ['_B'] not found in ['_A']."),
    ("resources_A=VCPU:1&required_N=HW_NUMA_ROOT&group_policy=none", "placement.query.bad_value",
     "Resourceless suffixed group request should be specified in `same_subtree` query param: "
     "bad group(s) - ['_N']."),
    ("resources_A=VCPU:1&required=HW_NUMA_ROOT&same_subtree=_A", "placement.query.bad_value",
     "bad group(s) - ['']."),
    ("required=HW_NUMA_ROOT", "placement.query.missing_value",
     "There must be at least one resources or resources[$S] parameter."),
    ("limit=4", "placement.query.missing_value", "There must be at least one resources or resources[$S] parameter."),
])
def test_bad_query_with_codes(client, query, code, detail):
    assert detail in bad(client, query, "1.39", code=code)


@pytest.mark.parametrize("query", [
    "resources=VCPU:1&root_required=",
    "resources=VCPU:1&root_required=HW_CPU_X86_AVX2,",
    "resources=VCPU:1&root_required=!",
])
def test_root_required_empty_trait(client, query):
    value = query.split("root_required=")[1]
    assert bad(client, query) == ("Invalid query string parameters: Expected 'required' parameter value of the "
                                  f"form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: {value}")


@pytest.mark.parametrize("mv", ["1.35", "1.39"])
def test_root_required_never_takes_in(client, mv):
    assert "only supported since microversion 1.39" in bad(client, "resources=VCPU:1&root_required=in:HW_CPU_X86_AVX2", mv)


def test_validation_order(client):
    def detail(query: str, mv: str = "1.39") -> str:
        return bad(client, query, mv, code=None)
    # whitelist before root_required before same_subtree before groups ...
    assert "'foo'" in detail("foo=1&root_required=A,!A&resources=")
    assert "root_required" in detail("root_required=A,!A&same_subtree=,&resources=")
    assert "same_subtree" in detail("same_subtree=_A,&resources=")
    assert RES in detail("resources=&resources1=VCPU:1&resources2=VCPU:1")
    # ... structure before conflicts before group_policy before names
    assert "orphaned" in detail("resources=VCPU:1&required1=X,!X", "1.35")
    assert "Conflicting" in detail("resources1=VCPU:1&resources2=VCPU:1&required1=X,!X")
    assert "group_policy" in detail("resources1=CUSTOM_NOPE:1&resources2=VCPU:1")
    assert "No such resource class" in detail("resources=CUSTOM_NOPE:1&required=CUSTOM_NOPE")


@pytest.mark.parametrize("query", [
    "resources=VCPU:99999999999999999999",
    "resources=VCPU:2147483648",
    "resources=VCPU:1&limit=99999999999999999999",
    "resources=VCPU:1&in_tree=00000000-0000-4000-8000-000000000000",
    "resources=VCPU:1&in_tree=A1F5C0DE00004000800000000000AAAA",
    f"resources=VCPU:1&member_of=in:{AGG},{UUID}",
])
def test_odd_but_valid_queries_are_not_errors(client, query):
    resp = client.get(f"{AC}?{query}", mv="1.39")
    assert resp.status == 200, resp


def test_huge_limit_returns_everything(client):
    resp = client.get(f"{AC}?resources=VCPU:1&limit=99999999999999999999", mv="1.39")
    assert len(resp.json["allocation_requests"]) == 1


def test_undecodable_query_is_400(client):
    resp = client.get(f"{AC}?resources=VCPU:1&required=%ff", mv="1.39")
    assert resp.status == 400


def test_first_group_policy_wins(client, one_host):
    one_host.provider("c1", parent="h", inventory={"VCPU": 4})
    one_host.provider("c2", parent="h", inventory={"VCPU": 4})
    query = "resources1=VCPU:1&resources2=VCPU:1"
    isolate = client.get(f"{AC}?{query}&group_policy=isolate&group_policy=none", mv="1.39")
    none = client.get(f"{AC}?{query}&group_policy=none&group_policy=isolate", mv="1.39")
    assert len(isolate.json["allocation_requests"]) == 6  # ordered pairs of distinct providers
    assert len(none.json["allocation_requests"]) == 9


def test_code_absent_before_1_23(client):
    resp = client.get(f"{AC}?resources=VCPU:x", mv="1.22")
    assert resp.status == 400 and "code" not in resp.error


def test_policy_accept_version_and_method(client):
    assert client.get(f"{AC}?resources=VCPU:1", mv="1.9").status == 404
    resp = client.get(f"{AC}?resources=VCPU:1", mv="1.39", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:allocation_candidates:list to be performed."
    # policy is checked before the query string
    assert client.get(f"{AC}?bogus=1", mv="1.39", token="user").status == 403
    resp = client.get(f"{AC}?resources=VCPU:1", mv="1.39", headers={"Accept": "text/html"})
    assert resp.status == 406
    resp = client.post(AC, json={}, mv="1.39")
    assert resp.status == 405 and resp.headers["allow"] == "GET"
