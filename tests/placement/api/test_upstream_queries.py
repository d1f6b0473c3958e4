"""Query strings parsed and rejected exactly as upstream does (issue 11):
trait names ignore surrounding blanks, schema failures carry the
validator's whole text, and the other parsing details upstream has.

Expected texts were taken from upstream Placement 16.0.0 answering the same
requests.
"""
from __future__ import annotations

import pytest

from tests.placement.api.test_allocation_candidates_fleet import Fleet

AC = "/allocation_candidates"
RP = "/resource_providers"


@pytest.fixture
def fleet(client):
    fleet = Fleet(client)
    fleet.provider("both", inventory={"VCPU": 4}, traits=["CUSTOM_A", "CUSTOM_B"])
    fleet.provider("only_a", inventory={"VCPU": 4}, traits=["CUSTOM_A"])
    fleet.provider("none", inventory={"VCPU": 4})
    return fleet


def names(fleet, resp) -> set[str]:
    assert resp.status == 200, resp
    return {p["name"] for p in resp.json["resource_providers"]}


def candidates(fleet, resp) -> set[str]:
    assert resp.status == 200, resp
    return {fleet.name[uuid] for uuid in resp.json["provider_summaries"]}


def detail(resp, status: int = 400) -> str:
    assert resp.status == status, resp
    return resp.error["detail"]


# --- blanks around trait names -----------------------------------------------

@pytest.mark.parametrize("value,expected", [
    ("CUSTOM_A ,CUSTOM_B", {"both"}),
    (" CUSTOM_A", {"both", "only_a"}),
    ("CUSTOM_A,\t!CUSTOM_B ", {"only_a"}),
    ("in: CUSTOM_B , CUSTOM_A", {"both", "only_a"}),
])
def test_provider_list_trait_names_ignore_blanks(client, fleet, value, expected):
    assert names(fleet, client.get(f"{RP}?required={value}", mv="1.39")) == expected


@pytest.mark.parametrize("query,expected", [
    ("resources=VCPU:1&required=CUSTOM_A ,CUSTOM_B", {"both"}),
    ("resources=VCPU:1&required=in:CUSTOM_B, CUSTOM_A&required= !CUSTOM_B", {"only_a"}),
    ("resources1=VCPU:1&required1= CUSTOM_B &group_policy=none", {"both"}),
    ("resources=VCPU:1&root_required=CUSTOM_A , !CUSTOM_B", {"only_a"}),
])
def test_candidate_trait_names_ignore_blanks(client, fleet, query, expected):
    assert candidates(fleet, client.get(f"{AC}?{query}", mv="1.39")) == expected


@pytest.mark.parametrize("value,form", [
    (" ,CUSTOM_A", "HW_CPU_X86_VMX,!CUSTOM_MAGIC"),
    ("CUSTOM_A, !", "HW_CPU_X86_VMX,!CUSTOM_MAGIC"),
    ("in:CUSTOM_A, ", "in:HW_CPU_X86_VMX,CUSTOM_MAGIC"),
])
def test_blank_trait_is_an_empty_trait(client, fleet, value, form):
    assert detail(client.get(f"{RP}?required={value}", mv="1.39")) == (
        f"Invalid query string parameters: Expected 'required' parameter value of the form: {form}. "
        f"Got an empty trait in: {value}")


def test_blank_inside_a_forbidden_name_is_kept(client, fleet):
    # "! CUSTOM_B" strips to itself; the name after "!" is " CUSTOM_B".
    assert detail(client.get(f"{AC}?resources=VCPU:1&required=!%20CUSTOM_B", mv="1.39")) == (
        "No such trait(s):  CUSTOM_B.")


def test_resource_class_names_are_taken_as_written(client, fleet):
    assert detail(client.get(f"{AC}?resources=%20VCPU:1", mv="1.39")) == (
        "Invalid resource class in resources parameter: No such resource class  VCPU.")
    assert detail(client.get(f"{RP}?resources=VCPU%20:1", mv="1.39")) == (
        "Invalid resource class in resources parameter: No such resource class VCPU .")
    # The amount may have blanks (it is read as a number).
    assert names(fleet, client.get(f"{RP}?resources=VCPU:%202", mv="1.39")) == {"both", "only_a", "none"}
    assert detail(client.get(f"{AC}?resources=%20", mv="1.39")) == (
        "Badly formed resources parameter. Expected resources query string parameter in form: "
        "?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.")


def test_member_of_with_blanks_is_not_a_uuid(client, fleet):
    agg = "0e1c1c3e-2d4f-4f3e-9d8c-3d2c1b0a9f8e"
    assert detail(client.get(f"{AC}?resources=VCPU:1&member_of=%20{agg}", mv="1.39")) == (
        f"Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). "
        f"Got:  {agg}")
    # in_tree is stripped before it is checked.
    root = fleet.uuid["both"]
    assert candidates(fleet, client.get(f"{AC}?resources=VCPU:1&in_tree=%20{root}", mv="1.39")) == {"both"}


def test_member_of_errors_name_the_suffix(client, fleet):
    agg = "0e1c1c3e-2d4f-4f3e-9d8c-3d2c1b0a9f8e"
    assert detail(client.get(f"{AC}?resources1=VCPU:1&member_of1=!{agg}", mv="1.31")) == (
        "Forbidden member_of1 parameters are not supported in the specified microversion")
    # The uuid is checked before the microversion allows "!".
    assert detail(client.get(f"{AC}?resources=VCPU:1&member_of=!nope", mv="1.31")) == (
        "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: nope")


# --- schema failures carry the validator's whole text -----------------------------

def test_candidates_limit_pattern(client, fleet):
    assert detail(client.get(f"{AC}?resources=VCPU:1&limit=x", mv="1.39")) == (
        "Invalid query string parameters: 'x' does not match '^[1-9][0-9]*$'  "
        "Failed validating 'pattern' in schema['properties']['limit']:     "
        "{'type': ['integer', 'string'],      'pattern': '^[1-9][0-9]*$',      'minimum': 1,      "
        "'minLength': 1}  On instance['limit']:     'x'")


def test_candidates_first_limit_is_reported_like_the_last(client, fleet):
    # Quirk docs/design/placement-quirks.md#q3: every occurrence must be valid; the bad first one reads as
    # upstream reports a bad last one.
    assert detail(client.get(f"{AC}?resources=VCPU:1&limit=0&limit=2", mv="1.39")).startswith(
        "Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'  Failed validating 'pattern'")


def test_candidates_required_resources_before_1_25(client, fleet):
    assert detail(client.get(f"{AC}?limit=1", mv="1.16")) == (
        "Invalid query string parameters: 'resources' is a required property  Failed validating "
        "'required' in schema:     {'type': 'object',      'properties': {'resources': {'type': "
        "'string'},                     'limit': {'type': ['integer', 'string'],                    "
        "           'pattern': '^[1-9][0-9]*$',                               'minimum': 1,         "
        "                      'minLength': 1}},      'required': ['resources'],      "
        "'additionalProperties': False}  On instance:     {'limit': '1'}")


def test_candidates_unknown_key_with_groups(client, fleet):
    assert detail(client.get(f"{AC}?resources=VCPU:1&colour=red", mv="1.25")) == (
        "Invalid query string parameters: 'colour' does not match any of the regexes: "
        "'^member_of([1-9][0-9]*)?$', '^required([1-9][0-9]*)?$', '^resources([1-9][0-9]*)?$'  "
        "Failed validating 'additionalProperties' in schema:     {'type': 'object',      "
        "'properties': {'limit': {'type': ['integer', 'string'],                               "
        "'pattern': '^[1-9][0-9]*$',                               'minimum': 1,                  "
        "             'minLength': 1},                     'group_policy': {'type': 'string',     "
        "                                 'enum': ['none', 'isolate']}},      'additionalProperties': "
        "False,      'patternProperties': {'^resources([1-9][0-9]*)?$': {'type': 'string'},        "
        "                    '^required([1-9][0-9]*)?$': {'type': 'string'},                      "
        "      '^member_of([1-9][0-9]*)?$': {'type': 'string'}}}  On instance:     "
        "{'resources': 'VCPU:1', 'colour': 'red'}")


def test_usages_consumer_type_pattern(client):
    assert detail(client.get("/usages?project_id=p&consumer_type=x", mv="1.38")) == (
        "Invalid query string parameters: 'x' does not match '^[A-Z0-9_]+$|^all|^unknown$'  "
        "Failed validating 'pattern' in schema['properties']['consumer_type']:     "
        "{'type': 'string',      'pattern': '^[A-Z0-9_]+$|^all|^unknown$',      'minLength': 1,      "
        "'maxLength': 255}  On instance['consumer_type']:     'x'")


def test_traits_unknown_parameter(client):
    assert detail(client.get("/traits?name=x&colour=red", mv="1.6")) == (
        "Invalid query string parameters: Additional properties are not allowed ('colour' was "
        "unexpected)  Failed validating 'additionalProperties' in schema:     {'type': 'object',      "
        "'properties': {'name': {'type': 'string'},                     'associated': {'type': "
        "'string'}},      'additionalProperties': False}  On instance:     {'name': 'x', 'colour': 'red'}")


def test_several_unknown_parameters_are_sorted(client):
    assert detail(client.get(f"{RP}?name=a&foo=2&bar=1", mv="1.0")).startswith(
        "Invalid query string parameters: Additional properties are not allowed ('bar', 'foo' were "
        "unexpected)  Failed validating 'additionalProperties' in schema:")


def test_body_errors_read_as_one_line_too(client):
    resp = client.post(RP, json={"name": 5}, mv="1.39")
    assert detail(resp) == (
        "JSON does not validate: 5 is not of type 'string'  Failed validating 'type' in "
        "schema['properties']['name']:     {'type': 'string', 'maxLength': 200}  "
        "On instance['name']:     5")
