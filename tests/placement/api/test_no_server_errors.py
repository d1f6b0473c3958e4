"""No route answers 5xx for hostile path values, whatever the backend.

PostgreSQL refuses NUL characters, columns have lengths MySQL may enforce or
truncate, and names may be any Unicode: every handler must turn these into
a 4xx (or an empty answer where upstream gives one), never a 500.
"""
from __future__ import annotations

import re
import urllib.parse

import pytest

from billeting.placement.api.routes import _TABLE

HOSTILE = ["%00", "a%00b", "x" * 300, urllib.parse.quote("é✓"), "CUSTOM_" + "A" * 300, "%20", "..."]
BODIES = {"PUT": {}, "POST": {}}


def _paths():
    for template, _ref in _TABLE:
        if "{" not in template:
            continue
        for value in HOSTILE:
            yield re.sub(r"\{[a-z_]+\}", value, template)


@pytest.mark.parametrize("mv", ["1.0", "1.39"])
def test_hostile_path_values_never_500(client, create_provider, mv):
    # One real provider so routes with several parameters reach their deeper checks.
    real = create_provider("real")["uuid"]
    failures = []
    paths = list(_paths()) + [f"/resource_providers/{real}/inventories/{v}" for v in HOSTILE]
    for path in paths:
        for method in ("GET", "PUT", "POST", "DELETE"):
            resp = client.request(method, path, json=BODIES.get(method), mv=mv)
            if resp.status >= 500:
                failures.append(f"{method} {path} -> {resp.status} {resp.text[:120]}")
    print("\n".join(failures))
    assert failures == []


@pytest.mark.parametrize("value", ["%00", "x" * 300, urllib.parse.quote("é✓")])
def test_hostile_query_values_never_500(client, value):
    queries = [
        f"/resource_providers?name={value}", f"/resource_providers?uuid={value}",
        f"/resource_providers?in_tree={value}", f"/resource_providers?member_of={value}",
        f"/resource_providers?required={value}", f"/resource_providers?resources={value}:1",
        f"/traits?name=in:{value}", f"/traits?name=startswith:{value}",
        f"/usages?project_id={value}", f"/usages?project_id=p&user_id={value}",
        f"/usages?project_id=p&consumer_type={value}",
        f"/allocation_candidates?resources={value}:1", f"/allocation_candidates?resources=VCPU:1&required={value}",
        f"/allocation_candidates?resources=VCPU:1&member_of={value}",
        f"/allocation_candidates?resources=VCPU:1&in_tree={value}",
    ]
    failures = []
    for path in queries:
        resp = client.get(path, mv="1.39")
        if resp.status >= 500:
            failures.append(f"GET {path} -> {resp.status} {resp.text[:120]}")
    print("\n".join(failures))
    assert failures == []
