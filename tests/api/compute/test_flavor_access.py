"""Private flavors as Nova keeps them (issue 28): invisible and unbootable
for a project without access; os-flavor-access grants and revokes it, and
the grants live in the API database."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from billeting.apidb import tables as at
from tests.support.wait import wait_for

MEMBER = {"X-Auth-Token": "mia:p1", "X-Roles": "member"}
OTHER = {"X-Auth-Token": "otto:p2", "X-Roles": "member"}


@pytest.fixture
def p(plane_factory):
    p = plane_factory(computes=1)
    p.flavor(fid="1", name="small", ram=512, vcpus=1, disk=1)
    r = p.call("POST", "/v2.1/flavors", {"flavor": {"id": "gold", "name": "gold", "ram": 512, "vcpus": 1, "disk": 1,
                                                     "os-flavor-access:is_public": False}})
    assert r.status_code == 200 and r.json["flavor"]["os-flavor-access:is_public"] is False, r.text
    return p


def ids(p, path: str, headers=None) -> list[str]:
    r = p.call("GET", path, headers=headers)
    assert r.status_code == 200, r.text
    return [f["id"] for f in r.json["flavors"]]


def boot(p, flavor: str, headers):
    return p.call("POST", "/v2.1/servers", {"server": {"name": "vm", "flavorRef": flavor, "imageRef": "cirros",
                                                       "networks": "none"}}, headers=headers)


def access(p, action: str, tenant: str, flavor: str = "gold", headers=None):
    return p.call("POST", f"/v2.1/flavors/{flavor}/action", {action: {"tenant": tenant}}, headers=headers)


def test_a_private_flavor_is_hidden_from_a_project_without_access(p):
    r = p.call("GET", "/v2.1/flavors/gold", headers=MEMBER)
    assert r.status_code == 404 and r.json["itemNotFound"]["message"] == "Flavor gold could not be found."
    assert p.call("GET", "/v2.1/flavors/gold/os-extra_specs", headers=MEMBER).status_code == 404
    for path in ("/v2.1/flavors", "/v2.1/flavors/detail", "/v2.1/flavors?is_public=false",
                 "/v2.1/flavors?is_public=none"):
        assert ids(p, path, MEMBER) == ["1"], path  # (a non-admin's is_public is ignored, as in Nova)
    r = boot(p, "gold", MEMBER)
    assert r.status_code == 400 and r.json["badRequest"]["message"] == "Flavor gold could not be found.", r.text
    r = boot(p, "http://compute/v2.1/flavors/gold", MEMBER)
    assert r.status_code == 400, r.text


def test_an_admin_lists_private_flavors_with_is_public_as_nova(p):
    # By default an admin too sees the public flavors (and those open to the admin's project).
    assert ids(p, "/v2.1/flavors") == ["1"]
    assert ids(p, "/v2.1/flavors?is_public=false") == ["gold"]
    assert ids(p, "/v2.1/flavors/detail?is_public=None") == ["1", "gold"]
    assert ids(p, "/v2.1/flavors?is_public=true") == ["1"]
    r = p.call("GET", "/v2.1/flavors?is_public=maybe")
    assert r.status_code == 400 and r.json["badRequest"]["message"] == "Invalid is_public filter [maybe]"
    assert p.call("GET", "/v2.1/flavors/gold").status_code == 200
    assert access(p, "addTenantAccess", "admin").status_code == 200
    assert ids(p, "/v2.1/flavors") == ["1", "gold"]


def test_tenant_access_is_granted_listed_and_revoked(p, api_engine):
    # Creating a private flavor opens it to no project, not even the creator's (as Nova).
    assert p.call("GET", "/v2.1/flavors/gold/os-flavor-access").json == {"flavor_access": []}
    r = access(p, "addTenantAccess", "p1")
    assert r.status_code == 200, r.text
    assert r.json == {"flavor_access": [{"flavor_id": "gold", "tenant_id": "p1"}]}
    r = access(p, "addTenantAccess", "p1")
    assert r.status_code == 409
    assert r.json["conflictingRequest"]["message"] == ("Flavor access already exists for flavor gold and project p1 "
                                                       "combination.")
    assert access(p, "addTenantAccess", "p0").json["flavor_access"] == [
        {"flavor_id": "gold", "tenant_id": "p0"}, {"flavor_id": "gold", "tenant_id": "p1"}]
    with api_engine.connect() as conn:
        assert sorted(conn.execute(select(at.flavor_projects.c.project_id)).scalars()) == ["p0", "p1"]

    # p1 now sees it, lists it and boots with it; p2 still does not.
    assert p.call("GET", "/v2.1/flavors/gold", headers=MEMBER).status_code == 200
    assert ids(p, "/v2.1/flavors/detail", MEMBER) == ["1", "gold"]
    assert boot(p, "gold", MEMBER).status_code == 202
    assert p.call("GET", "/v2.1/flavors/gold", headers=OTHER).status_code == 404
    assert boot(p, "gold", OTHER).status_code == 400

    r = access(p, "removeTenantAccess", "p1")
    assert r.status_code == 200 and r.json == {"flavor_access": [{"flavor_id": "gold", "tenant_id": "p0"}]}
    r = access(p, "removeTenantAccess", "p1")
    assert r.status_code == 404
    assert r.json["itemNotFound"]["message"] == "Flavor access not found for gold / p1 combination."
    assert p.call("GET", "/v2.1/flavors/gold", headers=MEMBER).status_code == 404

    # Deleting the flavor takes its grants along: a new flavor of that id opens to nobody.
    assert p.call("DELETE", "/v2.1/flavors/gold").status_code == 202
    with api_engine.connect() as conn:
        assert conn.execute(select(at.flavor_projects)).all() == []
    p.call("POST", "/v2.1/flavors", {"flavor": {"id": "gold", "name": "gold", "ram": 512, "vcpus": 1, "disk": 1,
                                                "os-flavor-access:is_public": False}})
    assert p.call("GET", "/v2.1/flavors/gold/os-flavor-access").json == {"flavor_access": []}


def test_flavor_access_errors_are_novas(p):
    cases = [
        (p.call("GET", "/v2.1/flavors/1/os-flavor-access"), 404, "Access list not available for public flavors."),
        (access(p, "addTenantAccess", "p1", flavor="1"), 409, "Can not add access to a public flavor."),
        (p.call("GET", "/v2.1/flavors/nope/os-flavor-access"), 404, "Flavor nope could not be found."),
        (access(p, "addTenantAccess", "p1", flavor="nope"), 404, "Flavor nope could not be found."),
        (access(p, "removeTenantAccess", "p1", flavor="nope"), 404, "Flavor nope could not be found."),
        (access(p, "addTenantAccess", "p1", headers=MEMBER), 403,
         "Policy doesn't allow os_compute_api:os-flavor-access:add_tenant_access to be performed."),
        (p.call("GET", "/v2.1/flavors/gold/os-flavor-access", headers=MEMBER), 403,
         "Policy doesn't allow os_compute_api:os-flavor-access to be performed."),
        (p.call("POST", "/v2.1/flavors/gold/action", {"shareWith": {"tenant": "p1"}}), 400,
         "There is no such action: shareWith"),
        (p.call("POST", "/v2.1/flavors/gold/action", {"addTenantAccess": {}}), 400, "tenant"),
        (p.call("POST", "/v2.1/flavors/gold/action", {"addTenantAccess": {"tenant": ""}}), 400, None),
        (p.call("POST", "/v2.1/flavors/gold/action", {"addTenantAccess": {"tenant": " p1"}}), 400, None),
        (p.call("POST", "/v2.1/flavors/gold/action", {"addTenantAccess": {"tenant": "x" * 256}}), 400, None),
        (p.call("POST", "/v2.1/flavors/gold/action", ["addTenantAccess"]), 400, None),
    ]
    for r, status, text in cases:
        assert r.status_code == status, (status, r.text)
        (kind, fault), = r.json.items()
        assert fault["code"] == status
        if text:
            assert text in fault["message"], r.text


def test_resizing_to_a_flavor_the_project_cannot_see_is_refused(p):
    uuid = boot(p, "1", MEMBER).json["server"]["id"]
    wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
    r = p.call("POST", f"/v2.1/servers/{uuid}/action", {"resize": {"flavorRef": "gold"}}, headers=MEMBER)
    assert r.status_code == 400 and r.json["badRequest"]["message"] == "Flavor gold could not be found.", r.text
