"""Nova's secure-RBAC defaults on every compute API route (issue 28): a
``reader`` of the project reads, a ``member`` acts, an ``admin``
administers; another project's member does not even find the project's
servers. The rules are oslo.policy defaults a policy file overrides."""
from __future__ import annotations

import dataclasses
import itertools

import falcon.testing
import pytest

from billeting.api.compute import policy
from billeting.api.compute.app import make_app
from billeting.common.policy import PolicyFileError
from tests.support.wait import wait_for

PROJECT = "p1"
PERSONAS = {
    "reader": {"X-Auth-Token": f"rita:{PROJECT}", "X-Roles": "reader"},
    "member": {"X-Auth-Token": f"mia:{PROJECT}", "X-Roles": "member"},
    "admin": {"X-Auth-Token": "ada:ops", "X-Roles": "admin"},
    "other": {"X-Auth-Token": "otto:p2", "X-Roles": "member"},
}
# Which personas each kind of rule lets through (other: when it is not about the project's own things).
ALLOWED = {"anyone": {"reader", "member", "admin", "other"}, "read": {"reader", "member", "admin", "other"},
           "act": {"member", "admin", "other"}, "admin": {"admin"}}
# Rules asked only once the route's own rule allowed the caller (a reader
# may not create a server at all, wherever it would go).
ASKED_AFTER = {"compute:servers:create:requested_destination": "os_compute_api:servers:create",
               "os_compute_api:servers:create:forced_host": "os_compute_api:servers:create"}
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


class World:
    """What the routes act on: project p1's server, group and a private
    flavor open to p1; an aggregate; and makers of fresh things to delete."""

    def __init__(self, p) -> None:
        self.p = p
        p.flavor(fid="1", name="small", ram=512, vcpus=1, disk=1)
        r = p.call("POST", "/v2.1/flavors", {"flavor": {"id": "priv", "name": "priv", "ram": 512, "vcpus": 1,
                                                         "disk": 1, "os-flavor-access:is_public": False}})
        assert r.status_code == 200, r.text
        assert self.admin("POST", "/v2.1/flavors/priv/action", {"addTenantAccess": {"tenant": PROJECT}}).status_code \
            == 200
        assert self.admin("POST", "/v2.1/flavors/priv/os-extra_specs", {"extra_specs": {"k": "v"}}).status_code == 200
        self.server = self.boot()
        # The lifecycle actions change the server's state: they act on one of their own.
        self.spare = self.boot()
        wait_for(lambda: p.status(self.server) == "ACTIVE", what="ACTIVE")
        wait_for(lambda: p.status(self.spare) == "ACTIVE", what="ACTIVE")
        actions = self.as_member("GET", f"/v2.1/servers/{self.server}/os-instance-actions").json
        self.request_id = actions["instanceActions"][0]["request_id"]
        self.group = self.make_group()
        self.aggregate = self.make_aggregate()

    def admin(self, method, path, body=None):
        return self.p.call(method, path, body, headers=PERSONAS["admin"])

    def as_member(self, method, path, body=None):
        return self.p.call(method, path, body, headers=PERSONAS["member"])

    def boot(self) -> str:
        r = self.as_member("POST", "/v2.1/servers", {"server": {"name": unique("vm"), "flavorRef": "1",
                                                                "imageRef": "cirros", "networks": "none"}})
        assert r.status_code == 202, r.text
        return r.json["server"]["id"]

    def make_group(self) -> str:
        r = self.as_member("POST", "/v2.1/os-server-groups",
                           {"server_group": {"name": unique("g"), "policy": "anti-affinity"}})
        assert r.status_code == 200, r.text
        return r.json["server_group"]["id"]

    def make_aggregate(self) -> int:
        r = self.admin("POST", "/v2.1/os-aggregates", {"aggregate": {"name": unique("agg")}})
        assert r.status_code == 200, r.text
        return r.json["aggregate"]["id"]

    def make_flavor(self) -> str:
        fid = unique("f")
        assert self.admin("POST", "/v2.1/flavors", {"flavor": {"id": fid, "name": fid, "ram": 1, "vcpus": 1,
                                                               "disk": 0}}).status_code == 200
        return fid


def new_flavor_body() -> dict:
    name = unique("new")
    return {"flavor": {"name": name, "id": name, "ram": 1, "vcpus": 1, "disk": 0}}


NOWHERE = "00000000-0000-4000-8000-0000000000ff"


def routes(w: World):
    """(rule, kind, scoped, method, path, body, found): ``scoped``: about one
    of the project's own things, that another project does not find (404);
    ``found``: an allowed caller finds what the path names (no 404).
    ``path`` and ``body`` may be made afresh for each caller."""
    srv = f"/v2.1/servers/{w.server}"
    spare = f"/v2.1/servers/{w.spare}"
    server = {"name": "x", "flavorRef": "1", "imageRef": "cirros", "networks": "none"}
    return [
        ("os_compute_api:servers:index", "read", False, "GET", "/v2.1/servers", None, True),
        ("os_compute_api:servers:detail", "read", False, "GET", "/v2.1/servers/detail", None, True),
        ("os_compute_api:servers:index:get_all_tenants", "admin", False, "GET", "/v2.1/servers?all_tenants=1",
         None, True),
        ("os_compute_api:servers:detail:get_all_tenants", "admin", False, "GET",
         "/v2.1/servers/detail?all_tenants=1", None, True),
        ("os_compute_api:servers:allow_all_filters", "admin", False, "GET", "/v2.1/servers?host=host1", None, True),
        ("os_compute_api:servers:show", "read", True, "GET", srv, None, True),
        ("os_compute_api:servers:create", "act", False, "POST", "/v2.1/servers", {"server": server}, True),
        ("compute:servers:create:requested_destination", "admin", False, "POST", "/v2.1/servers",
         {"server": {**server, "host": "host1"}}, True),
        ("os_compute_api:servers:create:forced_host", "admin", False, "POST", "/v2.1/servers",
         {"server": {**server, "availability_zone": "nova:host1"}}, True),
        ("os_compute_api:servers:delete", "act", True, "DELETE", lambda: f"/v2.1/servers/{w.boot()}", None, True),
        ("os_compute_api:servers:resize", "act", True, "POST", f"{srv}/action", {"resize": {"flavorRef": "1"}},
         True),
        ("os_compute_api:servers:confirm_resize", "act", True, "POST", f"{srv}/action", {"confirmResize": None},
         True),
        ("os_compute_api:servers:revert_resize", "act", True, "POST", f"{srv}/action", {"revertResize": None},
         True),
        ("os_compute_api:os-migrate-server:migrate", "admin", True, "POST", f"{srv}/action",
         {"migrate": {"host": "nowhere"}}, True),
        ("os_compute_api:os-migrate-server:migrate_live", "admin", True, "POST", f"{srv}/action",
         {"os-migrateLive": {"host": "nowhere", "block_migration": "auto"}}, True),
        ("os_compute_api:os-evacuate", "admin", True, "POST", f"{srv}/action", {"evacuate": {"host": "nowhere"}},
         True),
        ("os_compute_api:os-instance-actions:list", "read", True, "GET", f"{srv}/os-instance-actions", None, True),
        ("os_compute_api:os-instance-actions:show", "read", True, "GET",
         f"{srv}/os-instance-actions/{w.request_id}", None, True),
        ("os_compute_api:servers:migrations:index", "admin", True, "GET", f"{srv}/migrations", None, True),
        ("os_compute_api:servers:migrations:show", "admin", True, "GET", f"{srv}/migrations/1", None, False),
        ("os_compute_api:os-migrations:index", "admin", False, "GET", "/v2.1/os-migrations", None, True),
        (None, "anyone", False, "GET", "/v2.1/flavors", None, True),
        (None, "anyone", False, "GET", "/v2.1/flavors/detail", None, True),
        (None, "anyone", False, "GET", "/v2.1/flavors/1", None, True),
        (None, "read", True, "GET", "/v2.1/flavors/priv", None, True),  # private: open to p1 only
        ("os_compute_api:os-flavor-manage:create", "admin", False, "POST", "/v2.1/flavors", new_flavor_body, True),
        ("os_compute_api:os-flavor-manage:delete", "admin", False, "DELETE",
         lambda: f"/v2.1/flavors/{w.make_flavor()}", None, True),
        ("os_compute_api:os-flavor-extra-specs:index", "read", True, "GET", "/v2.1/flavors/priv/os-extra_specs",
         None, True),
        ("os_compute_api:os-flavor-extra-specs:show", "read", True, "GET", "/v2.1/flavors/priv/os-extra_specs/k",
         None, True),
        ("os_compute_api:os-flavor-extra-specs:create", "admin", False, "POST", "/v2.1/flavors/priv/os-extra_specs",
         {"extra_specs": {"k2": "v"}}, True),
        ("os_compute_api:os-flavor-extra-specs:update", "admin", False, "PUT", "/v2.1/flavors/priv/os-extra_specs/k2",
         {"k2": "w"}, True),
        ("os_compute_api:os-flavor-extra-specs:delete", "admin", False, "DELETE",
         "/v2.1/flavors/priv/os-extra_specs/k2", None, True),
        ("os_compute_api:os-flavor-access", "admin", False, "GET", "/v2.1/flavors/priv/os-flavor-access", None, True),
        ("os_compute_api:os-flavor-access:add_tenant_access", "admin", False, "POST", "/v2.1/flavors/priv/action",
         {"addTenantAccess": {"tenant": "p9"}}, True),
        ("os_compute_api:os-flavor-access:remove_tenant_access", "admin", False, "POST",
         "/v2.1/flavors/priv/action", {"removeTenantAccess": {"tenant": "p9"}}, True),
        ("os_compute_api:os-server-groups:index", "read", False, "GET", "/v2.1/os-server-groups", None, True),
        ("os_compute_api:os-server-groups:create", "act", False, "POST", "/v2.1/os-server-groups",
         lambda: {"server_group": {"name": unique("g"), "policy": "affinity"}}, True),
        ("os_compute_api:os-server-groups:show", "read", True, "GET", f"/v2.1/os-server-groups/{w.group}", None,
         True),
        ("os_compute_api:os-server-groups:delete", "act", True, "DELETE",
         lambda: f"/v2.1/os-server-groups/{w.make_group()}", None, True),
        ("os_compute_api:limits", "anyone", False, "GET", "/v2.1/limits", None, True),
        ("os_compute_api:limits:other_project", "admin", False, "GET", "/v2.1/limits?tenant_id=p3", None, True),
        ("os_compute_api:os-aggregates:index", "admin", False, "GET", "/v2.1/os-aggregates", None, True),
        ("os_compute_api:os-aggregates:create", "admin", False, "POST", "/v2.1/os-aggregates",
         lambda: {"aggregate": {"name": unique("agg")}}, True),
        ("os_compute_api:os-aggregates:show", "admin", False, "GET", f"/v2.1/os-aggregates/{w.aggregate}", None,
         True),
        ("os_compute_api:os-aggregates:update", "admin", False, "PUT", f"/v2.1/os-aggregates/{w.aggregate}",
         {"aggregate": {"name": unique("renamed")}}, True),
        ("os_compute_api:os-aggregates:set_metadata", "admin", False, "POST",
         f"/v2.1/os-aggregates/{w.aggregate}/action", {"set_metadata": {"metadata": {"k": "v"}}}, True),
        ("os_compute_api:os-aggregates:add_host", "admin", False, "POST", f"/v2.1/os-aggregates/{w.aggregate}/action",
         {"add_host": {"host": "host1"}}, True),
        ("os_compute_api:os-aggregates:remove_host", "admin", False, "POST",
         f"/v2.1/os-aggregates/{w.aggregate}/action", {"remove_host": {"host": "host1"}}, True),
        ("os_compute_api:os-aggregates:delete", "admin", False, "DELETE",
         lambda: f"/v2.1/os-aggregates/{w.make_aggregate()}", None, True),
        ("os_compute_api:os-availability-zone:list", "anyone", False, "GET", "/v2.1/os-availability-zone", None,
         True),
        ("os_compute_api:os-availability-zone:detail", "admin", False, "GET", "/v2.1/os-availability-zone/detail",
         None, True),
        ("os_compute_api:os-services:list", "admin", False, "GET", "/v2.1/os-services", None, True),
        ("os_compute_api:os-services:update", "admin", False, "PUT", f"/v2.1/os-services/{NOWHERE}",
         {"status": "disabled"}, False),
        ("os_compute_api:os-services:delete", "admin", False, "DELETE", f"/v2.1/os-services/{NOWHERE}", None, False),
        ("os_compute_api:os-hypervisors:list", "admin", False, "GET", "/v2.1/os-hypervisors", None, True),
        ("os_compute_api:os-hypervisors:list-detail", "admin", False, "GET", "/v2.1/os-hypervisors/detail", None,
         True),
        ("os_compute_api:os-hypervisors:statistics", "admin", False, "GET", "/v2.1/os-hypervisors/statistics", None,
         True),
        ("os_compute_api:os-hypervisors:show", "admin", False, "GET", f"/v2.1/os-hypervisors/{NOWHERE}", None,
         False),
        # The lifecycle actions, last and on their own server: a state an
        # earlier caller left is a 409, never a 403, for the next one.
        ("os_compute_api:servers:stop", "act", True, "POST", f"{spare}/action", {"os-stop": None}, True),
        ("os_compute_api:servers:start", "act", True, "POST", f"{spare}/action", {"os-start": None}, True),
        ("os_compute_api:servers:rebuild", "act", True, "POST", f"{spare}/action", {"rebuild": {"imageRef": "cirros"}},
         True),
        ("os_compute_api:os-shelve:shelve", "act", True, "POST", f"{spare}/action", {"shelve": None}, True),
        ("os_compute_api:os-shelve:shelve_offload", "admin", True, "POST", f"{spare}/action", {"shelveOffload": None},
         True),
        ("os_compute_api:os-shelve:unshelve", "act", True, "POST", f"{spare}/action", {"unshelve": None}, True),
        ("os_compute_api:os-lock-server:unlock", "act", True, "POST", f"{spare}/action", {"unlock": None}, True),
        ("os_compute_api:os-lock-server:lock", "act", True, "POST", f"{spare}/action", {"lock": None}, True),
    ]


def test_every_route_answers_each_persona_as_novas_defaults_do(plane_factory):
    p = plane_factory(computes=1)
    w = World(p)
    table = routes(w)
    # Every rule the compute API has is asked by some route of the table
    # (but a non-admin's all_projects, which is ignored as in Nova).
    # Two more are asked only after the route's own rule, in one case each
    # (another's lock; unshelve to a named host): test_lifecycle_actions.py
    # checks their refusals.
    assert {rule for rule, *_ in table if rule} == {name for name, *_ in policy.RULES} - {
        "os_compute_api:os-server-groups:index:all_projects",
        "os_compute_api:os-lock-server:unlock:unlock_override", "os_compute_api:os-shelve:unshelve_to_host"}
    failures = []
    for rule, kind, scoped, method, path, body, found in table:
        for persona, headers in PERSONAS.items():
            where = path() if callable(path) else path
            doc = body() if callable(body) else body
            r = p.call(method, where, doc, headers=headers)
            allowed = persona in ALLOWED[kind] and not (scoped and persona == "other")
            if persona == "other" and scoped:
                ok = r.status_code == 404
            elif allowed:
                ok = r.status_code not in (401, 403) and r.status_code < 500 and (r.status_code != 404 or not found)
            else:
                fault = r.json.get("forbidden", {}) if r.status_code == 403 else {}
                ok = fault.get("code") == 403 and fault.get("message") in (
                    f"Policy doesn't allow {rule} to be performed.",
                    f"Policy doesn't allow {ASKED_AFTER.get(rule, rule)} to be performed.")
            if not ok:
                failures.append(f"{persona}: {method} {where} {doc} -> {r.status_code} {r.text[:200]}")
    assert not failures, "\n".join(failures)


def test_a_reader_reads_but_does_not_delete_and_another_project_finds_nothing(plane_factory):
    p = plane_factory(computes=1)
    p.flavor(fid="1", name="small", ram=512, vcpus=1, disk=1)
    w = World.__new__(World)
    w.p = p
    uuid = w.boot()
    reader, other = PERSONAS["reader"], PERSONAS["other"]
    assert p.call("GET", f"/v2.1/servers/{uuid}", headers=reader).status_code == 200
    assert [s["id"] for s in p.call("GET", "/v2.1/servers", headers=reader).json["servers"]] == [uuid]
    r = p.call("DELETE", f"/v2.1/servers/{uuid}", headers=reader)
    assert r.status_code == 403
    assert r.json == {"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:servers:delete "
                                                            "to be performed."}}
    r = p.call("DELETE", f"/v2.1/servers/{uuid}", headers=other)
    assert r.status_code == 404 and r.json["itemNotFound"]["message"] == f"Instance {uuid} could not be found."
    assert p.call("GET", "/v2.1/servers", headers=other).json["servers"] == []
    # A role the API does not know grants nothing; no role at all neither.
    for roles in ("observer", ""):
        headers = {"X-Auth-Token": f"eve:{PROJECT}", "X-Roles": roles}
        assert p.call("GET", f"/v2.1/servers/{uuid}", headers=headers).status_code == 403
    assert p.call("DELETE", f"/v2.1/servers/{uuid}", headers=PERSONAS["member"]).status_code == 204


@pytest.mark.parametrize("override, persona, before, after", [
    # Tighter: deleting becomes the admin's alone.
    ('"os_compute_api:servers:delete": "rule:context_is_admin"', "member", 204, 403),
    # Looser: the project's readers may look at the compute services.
    ('"os_compute_api:os-services:list": "role:reader"', "reader", 403, 200),
])
def test_a_policy_file_overrides_a_default_rule(plane_factory, tmp_path, override, persona, before, after):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(override + "\n")
    p = plane_factory(computes=1)
    p.flavor(fid="1", name="small", ram=512, vcpus=1, disk=1)
    w = World.__new__(World)
    w.p = p
    # The same plane served twice: with the default rules, and with the file.
    overridden = falcon.testing.TestClient(make_app(dataclasses.replace(
        p.plane.deps, enforcer=policy.enforcer(policy_file=str(policy_file)))))
    answers = []
    for client in (p.client, overridden):
        headers = {**PERSONAS[persona], "OpenStack-API-Version": "compute 2.90"}
        if "delete" in override:
            r = client.simulate_delete(f"/v2.1/servers/{w.boot()}", headers=headers)
        else:
            r = client.simulate_get("/v2.1/os-services", headers=headers)
        answers.append(r.status_code)
    assert answers == [before, after]


def test_the_compute_api_refuses_an_unreadable_policy_file(plane_factory, tmp_path):
    broken = tmp_path / "policy.yaml"
    broken.write_text('"os_compute_api:servers:delete": [unclosed\n')
    with pytest.raises(PolicyFileError, match=f"policy file {broken}"):
        policy.enforcer(policy_file=str(broken))
