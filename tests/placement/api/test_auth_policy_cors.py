"""Authentication, policy and CORS (docs/design/placement-http.md#authentication, #policy, #cors).

Keystone mode runs the real keystonemiddleware ``auth_token`` configured
from a config file; only the call to the identity server is replaced, by a
function that returns v3 token bodies, so the identity headers the
middleware sets and the policy decisions on them are the real ones.
"""
from __future__ import annotations

import datetime as dt
import uuid as uuidlib

import pytest
from keystonemiddleware import auth_token

from billeting.config import Settings
from billeting.placement.api.app import make_app
from billeting.common.http.context import context_from_environ
from billeting.placement.api.policy import Authorizer
from billeting.placement.api.routes import load_routes
from tests.conftest import PlacementClient

FORBIDDEN_CODE = "placement.undefined_code"


def forbidden(resp, rule: str) -> bool:
    return (resp.status == 403
            and resp.error["detail"].endswith(f"Policy does not allow {rule} to be performed.")
            and resp.error["code"] == FORBIDDEN_CODE)


@pytest.fixture
def client(app) -> PlacementClient:
    """Latest microversion, so 403 bodies carry their error code."""
    return PlacementClient(app, mv="1.39")


@pytest.fixture
def build_client(db_url, engine):
    def build(token="admin", mv="1.39", **settings) -> PlacementClient:
        return PlacementClient(make_app(Settings(db=db_url, **settings), engine), token=token, mv=mv)

    return build


def has_route(path: str) -> bool:
    return any(route == path for route, _ in load_routes()[0])


# --- request context from identity headers --------------------------------------

def test_context_reads_the_identity_headers():
    ctx = context_from_environ({
        "HTTP_X_USER_ID": "u1", "HTTP_X_PROJECT_ID": "p1", "HTTP_X_ROLES": "reader, member,,admin",
        "HTTP_X_SERVICE_ROLES": "service", "HTTP_OPENSTACK_SYSTEM_SCOPE": "all",
        "HTTP_X_DOMAIN_ID": "d1",
        "HTTP_X_OPENSTACK_REQUEST_ID": "req-12345678-1234-1234-1234-123456789abc",
    }, "req-local")
    assert (ctx.request_id, ctx.user_id, ctx.project_id, ctx.system_scope, ctx.domain_id) == \
        ("req-local", "u1", "p1", "all", "d1")
    assert ctx.roles == ["reader", "member", "admin"]
    assert ctx.service_roles == ["service"]
    assert ctx.global_request_id == "req-12345678-1234-1234-1234-123456789abc"


@pytest.mark.parametrize("global_id", ["req-not-a-uuid", "12345678-1234-1234-1234-123456789abc",
                                       "req-12345678-1234-1234-1234-123456789ABC", ""])
def test_malformed_global_request_id_is_ignored(global_id):
    ctx = context_from_environ({"HTTP_X_OPENSTACK_REQUEST_ID": global_id}, "req-local")
    assert ctx.global_request_id is None
    assert ctx.user_id is None and ctx.roles == [] and ctx.service_roles == []


# --- policy decisions -------------------------------------------------------------

def environ_for(roles: str, project: str | None = "p1", system: str | None = None) -> dict:
    environ = {"HTTP_X_USER_ID": "u1", "HTTP_X_ROLES": roles}
    if project:
        environ["HTTP_X_PROJECT_ID"] = project
    if system:
        environ["HTTP_OPENSTACK_SYSTEM_SCOPE"] = system
    return environ


@pytest.mark.parametrize("roles,system,rp_list,reshape,own_usages,other_usages", [
    ("admin", None, True, False, True, True),
    ("service", None, True, True, True, True),
    ("reader", None, False, False, True, False),
    ("reader,member", None, False, False, True, False),
    ("member", None, False, False, False, False),
    ("", None, False, False, False, False),
    # Every rule is project-scoped: a system-scoped token is refused outright.
    ("admin", "all", False, False, False, False),
    ("service", "all", False, False, False, False),
])
def test_default_rules(roles, system, rp_list, reshape, own_usages, other_usages):
    authorizer = Authorizer()
    ctx = context_from_environ(environ_for(roles, None if system else "p1", system), "req-x")
    assert authorizer.allowed(ctx, "placement:resource_providers:list") is rp_list
    assert authorizer.allowed(ctx, "placement:reshaper:reshape") is reshape
    assert authorizer.allowed(ctx, "placement:usages", {"project_id": "p1"}) is own_usages
    assert authorizer.allowed(ctx, "placement:usages", {"project_id": "p2"}) is other_usages


@pytest.mark.filterwarnings("ignore")
def test_legacy_rules_let_admin_reshape():
    authorizer = Authorizer(legacy=True)
    admin = context_from_environ(environ_for("admin"), "req-x")
    nobody = context_from_environ(environ_for(""), "req-x")
    assert authorizer.allowed(admin, "placement:reshaper:reshape")
    assert authorizer.allowed(admin, "placement:resource_providers:create")
    assert not authorizer.allowed(nobody, "placement:reshaper:reshape")
    system_admin = context_from_environ(environ_for("admin", None, "all"), "req-x")
    assert not authorizer.allowed(system_admin, "placement:reshaper:reshape")


def test_policy_file_overrides_a_rule_by_name(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:resource_providers:list": "role:reader"\n'
                      '"admin_or_service_api": "role:admin or role:service or role:operator"\n')
    authorizer = Authorizer(policy_file=str(policy))
    reader = context_from_environ(environ_for("reader"), "req-x")
    admin = context_from_environ(environ_for("admin"), "req-x")
    operator = context_from_environ(environ_for("operator"), "req-x")
    assert authorizer.allowed(reader, "placement:resource_providers:list")
    assert not authorizer.allowed(admin, "placement:resource_providers:list")
    # Overriding a base rule changes every operation built on it.
    assert authorizer.allowed(operator, "placement:traits:list")
    assert not authorizer.allowed(reader, "placement:traits:list")


# --- policy over HTTP (noauth2) -----------------------------------------------------

def test_user_without_roles_gets_403_everywhere_but_root(client):
    assert client.get("/", token="user").status == 200
    assert forbidden(client.get("/resource_providers", token="user"), "placement:resource_providers:list")
    assert forbidden(client.post("/resource_providers", json={"name": "x"}, token="user"),
                     "placement:resource_providers:create")
    # 403 comes before the 404 for an unknown object (docs/design/placement-http.md#processing-order).
    assert forbidden(client.get(f"/resource_providers/{uuidlib.uuid4()}", token="user"),
                     "placement:resource_providers:show")


def test_403_body_before_1_23_has_no_code(client):
    resp = client.get("/resource_providers", token="user", mv="1.22")
    assert resp.status == 403 and "code" not in resp.error
    assert resp.error["title"] == "Forbidden"


def test_service_role_may_do_what_admin_may(client):
    resp = client.get("/resource_providers", token="nova:service-project", headers={"X-Roles": "service"})
    assert resp.status == 200


def test_system_scoped_admin_is_refused(client):
    resp = client.get("/resource_providers", headers={"OpenStack-System-Scope": "all"})
    assert forbidden(resp, "placement:resource_providers:list")


@pytest.mark.skipif(not has_route("/usages"), reason="usages handler not written yet")
def test_reader_sees_only_its_own_projects_usages(client):
    reader = {"X-Roles": "reader"}
    own = client.get("/usages?project_id=p1", token="alice:p1", headers=reader)
    assert own.status == 200 and own.json["usages"] == {}
    other = client.get("/usages?project_id=p2", token="alice:p1", headers=reader)
    assert forbidden(other, "placement:usages")
    assert forbidden(client.get("/resource_providers", token="alice:p1", headers=reader),
                     "placement:resource_providers:list")
    # admin reads any project's usages
    assert client.get("/usages?project_id=p2").status == 200


RESHAPE_BODY = {"inventories": {}, "allocations": {}}


@pytest.mark.skipif(not has_route("/reshaper"), reason="reshaper handler not written yet")
def test_reshaper_is_service_only_by_default_and_admin_may_in_legacy_mode(build_client):
    default = build_client()
    assert forbidden(default.post("/reshaper", json=RESHAPE_BODY), "placement:reshaper:reshape")
    resp = default.post("/reshaper", json=RESHAPE_BODY, token="nova:svc", headers={"X-Roles": "service"})
    assert resp.status != 403
    legacy = build_client(legacy_policy=True)
    assert legacy.post("/reshaper", json=RESHAPE_BODY).status != 403
    assert forbidden(legacy.post("/reshaper", json=RESHAPE_BODY, token="user"), "placement:reshaper:reshape")


def test_policy_file_over_http(build_client, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:resource_providers:list": "role:reader"\n')
    client = build_client(policy_file=str(policy))
    assert forbidden(client.get("/resource_providers"), "placement:resource_providers:list")
    assert client.get("/resource_providers", token="bob:p1", headers={"X-Roles": "reader"}).status == 200
    assert client.post("/resource_providers", json={"name": "still-admin"}).status == 200


def test_policy_file_changes_are_picked_up(build_client, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:resource_providers:list": "role:admin"\n')
    client = build_client(policy_file=str(policy))
    assert client.get("/resource_providers").status == 200
    policy.write_text('"placement:resource_providers:list": "!"\n')
    import os
    stat = policy.stat()
    os.utime(policy, (stat.st_atime, stat.st_mtime + 5))
    assert forbidden(client.get("/resource_providers"), "placement:resource_providers:list")


# --- keystone mode ------------------------------------------------------------------

KEYSTONE_CONF = """\
[keystone_authtoken]
www_authenticate_uri = http://keystone.invalid:5000/v3
auth_url = http://keystone.invalid:5000/v3
auth_type = password
username = placement
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
"""


def v3_token(user: str, roles: list[str], project: str | None = None, system: bool = False) -> dict:
    now = dt.datetime.now(dt.UTC)
    domain = {"id": "default", "name": "Default"}
    token = {
        "methods": ["password"],
        "issued_at": now.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
        "expires_at": (now + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
        "user": {"id": f"{user}-id", "name": user, "domain": domain},
        "roles": [{"id": f"{role}-id", "name": role} for role in roles],
        "catalog": [],
    }
    if project:
        token["project"] = {"id": project, "name": project, "domain": domain}
    if system:
        token["system"] = {"all": True}
    return {"token": token}


TOKENS = {
    "tok-admin": v3_token("admin", ["admin", "member", "reader"], project="p1"),
    "tok-service": v3_token("nova", ["service"], project="service"),
    "tok-reader": v3_token("alice", ["reader"], project="p1"),
    "tok-nobody": v3_token("bob", [], project="p1"),
    "tok-system": v3_token("root", ["admin"], system=True),
}


@pytest.fixture
def keystone_client(tmp_path, db_url, engine, monkeypatch):
    conf = tmp_path / "billeting.conf"
    conf.write_text(KEYSTONE_CONF)
    seen: list[str] = []

    def fetch_token(self, token, **kwargs):
        seen.append(token)
        if token not in TOKENS:
            raise auth_token.InvalidToken("Token authorization failed")
        return TOKENS[token]

    monkeypatch.setattr(auth_token.AuthProtocol, "fetch_token", fetch_token)
    app = make_app(Settings(db=db_url, auth="keystone", config_file=str(conf)), engine)
    client = PlacementClient(app, token=None, mv="1.39")
    client.seen_tokens = seen
    return client


@pytest.mark.filterwarnings("ignore")
def test_keystone_without_token_is_401_but_root_is_open(keystone_client):
    root = keystone_client.get("/")
    assert root.status == 200 and root.json["versions"][0]["max_version"] == "1.39"
    resp = keystone_client.get("/resource_providers")
    assert resp.status == 401
    # The config file was really read: the challenge names its identity endpoint.
    assert resp.headers["www-authenticate"] == 'Keystone uri="http://keystone.invalid:5000/v3"'
    assert keystone_client.seen_tokens == []
    # 401 wins over any later check, microversion included (docs/design/placement-http.md#processing-order).
    assert keystone_client.get("/resource_providers", mv="9.99").status == 401


@pytest.mark.filterwarnings("ignore")
def test_keystone_invalid_token_is_401(keystone_client):
    assert keystone_client.get("/resource_providers", token="tok-forged").status == 401
    assert keystone_client.seen_tokens == ["tok-forged"]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("token,status", [
    ("tok-admin", 200), ("tok-service", 200), ("tok-reader", 403), ("tok-nobody", 403), ("tok-system", 403),
])
def test_keystone_identity_drives_policy(keystone_client, token, status):
    resp = keystone_client.get("/resource_providers", token=token)
    assert resp.status == status, resp
    if status == 403:
        assert forbidden(resp, "placement:resource_providers:list")


@pytest.mark.filterwarnings("ignore")
def test_keystone_strips_identity_headers_sent_by_the_client(keystone_client):
    spoofed = {"X-Roles": "admin", "X-Project-Id": "p1", "X-User-Id": "admin-id", "X-Service-Roles": "service"}
    resp = keystone_client.get("/resource_providers", token="tok-nobody", headers=spoofed)
    assert forbidden(resp, "placement:resource_providers:list")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.skipif(not has_route("/usages"), reason="usages handler not written yet")
def test_keystone_reader_persona(keystone_client):
    own = keystone_client.get("/usages?project_id=p1", token="tok-reader")
    assert own.status == 200
    assert forbidden(keystone_client.get("/usages?project_id=p2", token="tok-reader"), "placement:usages")


# --- CORS ------------------------------------------------------------------------------

ORIGIN = "https://dashboard.example"


def preflight(client, origin: str, request_headers: str = "X-Auth-Token,OpenStack-API-Version",
              method: str = "GET"):
    return client.request("OPTIONS", "/resource_providers", token=None, headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": request_headers})


@pytest.fixture
def cors_client(build_client):
    return build_client(cors_origins=[ORIGIN, "http://127.0.0.1:8080"], cors_allow_headers=["X-Custom-Trace"])


def test_without_cors_options_is_405_and_no_cors_headers(client):
    resp = preflight(client, ORIGIN)
    assert resp.status == 401  # no token: authentication comes first
    resp = client.request("OPTIONS", "/resource_providers", headers={"Origin": ORIGIN})
    assert resp.status == 405
    assert "access-control-allow-origin" not in resp.headers
    assert "access-control-allow-origin" not in client.get("/resource_providers",
                                                           headers={"Origin": ORIGIN}).headers


def test_preflight_from_a_configured_origin(cors_client):
    resp = preflight(cors_client, ORIGIN, "X-Auth-Token,OpenStack-API-Version,Content-Type,X-Custom-Trace",
                     method="PUT")
    assert resp.status == 200
    assert resp.headers["access-control-allow-origin"] == ORIGIN
    assert resp.headers["access-control-allow-methods"] == "PUT"
    assert resp.headers["access-control-allow-headers"] == \
        "X-Auth-Token,OpenStack-API-Version,Content-Type,X-Custom-Trace"
    assert resp.headers["x-openstack-request-id"].startswith("req-")
    second = preflight(cors_client, "http://127.0.0.1:8080")
    assert second.headers["access-control-allow-origin"] == "http://127.0.0.1:8080"


@pytest.mark.parametrize("origin,headers", [
    ("https://evil.example", "X-Auth-Token"),  # origin not configured
    (ORIGIN + ":8443", "X-Auth-Token"),  # another port is another origin
    (ORIGIN, "X-Auth-Token,X-Not-Allowed"),  # a header that was not allowed
])
def test_preflight_refused(cors_client, origin, headers):
    resp = preflight(cors_client, origin, headers)
    assert "access-control-allow-origin" not in resp.headers
    assert "access-control-allow-methods" not in resp.headers


def test_simple_request_from_configured_origin_gets_cors_headers(cors_client):
    resp = cors_client.get("/resource_providers", headers={"Origin": ORIGIN})
    assert resp.status == 200
    assert resp.headers["access-control-allow-origin"] == ORIGIN
    assert "OpenStack-API-Version" in resp.headers["access-control-expose-headers"]
    assert "Origin" in resp.headers["vary"]
    other = cors_client.get("/resource_providers", headers={"Origin": "https://evil.example"})
    assert other.status == 200 and "access-control-allow-origin" not in other.headers


def test_cors_sits_outside_auth(cors_client):
    # An unauthenticated request still carries the CORS headers, so the
    # browser script can read the 401.
    resp = cors_client.get("/resource_providers", token=None, headers={"Origin": ORIGIN})
    assert resp.status == 401
    assert resp.headers["access-control-allow-origin"] == ORIGIN


def test_cors_options_without_origin_and_normal_requests_unchanged(cors_client):
    assert cors_client.get("/resource_providers").status == 200
    assert cors_client.get("/", token=None).status == 200


def test_cached_policy_decisions_follow_a_changed_policy_file(tmp_path):
    """Decisions are cached, but an edited policy file still takes effect at once."""
    from billeting.common.http.context import RequestContext
    from billeting.placement.api.policy import Authorizer

    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"placement:traits:list": "role:admin"\n')
    authorizer = Authorizer(policy_file=str(policy_file))
    reader = RequestContext("req-1", user_id="u", project_id="p", roles=["reader"])
    assert not authorizer.allowed(reader, "placement:traits:list")
    assert not authorizer.allowed(reader, "placement:traits:list")  # answered from the cache
    policy_file.write_text('"placement:traits:list": "role:reader"\n# changed\n')
    assert authorizer.allowed(reader, "placement:traits:list")
