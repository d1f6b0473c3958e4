"""Policy configuration as any OpenStack service has it (issue 11):
``[oslo_policy] enforce_new_defaults`` / ``enforce_scope`` from the config
file, legacy mode without a warning per rule, and a policy file that is
edited into something invalid while the server runs."""
from __future__ import annotations

import logging
import os
import warnings

import pytest

from billeting.config import load_settings
from billeting.placement.api.app import make_app
from billeting.common.http.context import context_from_environ
from billeting.common.policy import PolicyFileError, describe, scope_is_configurable
from billeting.placement.api.policy import Authorizer
from tests.conftest import PlacementClient
from tests.test_cli import one_line_error, run_cli

RESHAPE_BODY = {"inventories": {}, "allocations": {}}


def ctx(roles: str, *, system: str | None = None, project: str = "p1"):
    environ = {"HTTP_X_USER_ID": "u1", "HTTP_X_ROLES": roles}
    if system:
        environ["HTTP_OPENSTACK_SYSTEM_SCOPE"] = system
    else:
        environ["HTTP_X_PROJECT_ID"] = project
    return context_from_environ(environ, "req-x")


@pytest.fixture
def client_from_config(db_url, engine, tmp_path):
    def build(text: str) -> PlacementClient:
        conf = tmp_path / "billeting.conf"
        conf.write_text(text)
        settings = load_settings({"config_file": str(conf), "db": db_url}, environ={})
        return PlacementClient(make_app(settings, engine), mv="1.39")

    return build


def touch_later(path) -> None:
    """Make sure the file looks changed even on a coarse-mtime file system."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))


# --- [oslo_policy] from the config file ------------------------------------------------

def test_enforce_new_defaults_false_in_the_config_file_is_legacy_mode(client_from_config):
    legacy = client_from_config("[oslo_policy]\nenforce_new_defaults = False\n")
    assert legacy.post("/reshaper", json=RESHAPE_BODY).status != 403
    default = client_from_config("[oslo_policy]\nenforce_new_defaults = True\n")
    resp = default.post("/reshaper", json=RESHAPE_BODY)
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:reshaper:reshape to be performed."


def test_policy_file_from_the_config_file(client_from_config, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:resource_providers:list": "role:reader"\n')
    client = client_from_config(f"[oslo_policy]\npolicy_file = {policy}\n")
    assert client.get("/resource_providers").status == 403
    assert client.get("/resource_providers", token="u:p", headers={"X-Roles": "reader"}).status == 200


def test_enforce_scope_false_behaves_as_upstream(client_from_config):
    # Upstream's oslo.policy (6.x) has no enforce_scope any more: system-scoped
    # tokens stay refused whatever the file says. With an oslo.policy that
    # still has the option, it applies, as it would for upstream.
    client = client_from_config("[oslo_policy]\nenforce_scope = False\n")
    resp = client.get("/resource_providers", headers={"OpenStack-System-Scope": "all"})
    assert resp.status == (200 if scope_is_configurable() else 403)
    strict = client_from_config("[oslo_policy]\nenforce_scope = True\n")
    assert strict.get("/resource_providers", headers={"OpenStack-System-Scope": "all"}).status == 403


# --- legacy mode is quiet -----------------------------------------------------------

def test_legacy_mode_emits_no_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        authorizer = Authorizer(legacy=True)
        assert authorizer.allowed(ctx("admin"), "placement:reshaper:reshape")
        assert authorizer.allowed(ctx("reader"), "placement:usages", {"project_id": "p1"})
    assert [str(w.message) for w in caught] == []


def test_describe_names_the_defaults_in_force():
    assert describe(legacy=False).startswith("new policy defaults in force (enforce_new_defaults = True)")
    assert describe(legacy=True).startswith("legacy policy defaults in force (enforce_new_defaults = False)")
    assert describe(legacy=False).endswith("; system-scoped tokens refused")
    relaxed = describe(legacy=False, enforce_scope=False)
    if scope_is_configurable():
        assert relaxed.endswith("scope not enforced (enforce_scope = False)")
    else:
        assert "enforce_scope = False has no effect" in relaxed


@pytest.mark.slow
def test_legacy_serve_logs_one_policy_line_and_no_warnings(tmp_path):
    from tests.concurrency.serve import running_server

    db = f"sqlite:///{tmp_path / 'p.sqlite'}"
    assert run_cli("db", "upgrade", "--db", db).returncode == 0
    with running_server(db, workers=2, args=("--legacy-policy",)) as server:
        log = server.log()  # workers build their app (and policy) before the server answers
    assert "Warning" not in log and "warnings.warn" not in log, log
    policy_lines = [line for line in log.splitlines() if " policy: " in line]
    assert len(policy_lines) == 1, log
    assert "legacy policy defaults in force" in policy_lines[0]


# --- a policy file edited while running ------------------------------------------------

@pytest.mark.parametrize("broken", [
    '"placement:resource_providers:list": [unclosed\n',
    "- just\n- a list\n",
    "\t: tab\n",
])
def test_policy_file_turned_invalid_keeps_the_old_rules(build_policy_client, caplog, broken):
    client, policy = build_policy_client('"placement:resource_providers:list": "role:admin"\n')
    assert client.get("/resource_providers").status == 200
    policy.write_text(broken)
    touch_later(policy)
    with caplog.at_level(logging.ERROR, logger="billeting.placement.api.policy"):
        for _ in range(3):
            assert client.get("/resource_providers").status == 200  # old rules, never a 500
            assert client.get("/resource_providers", token="nobody").status == 403
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, caplog.text
    assert errors[0].getMessage().startswith(f"policy file {policy}: ")
    assert errors[0].getMessage().endswith("; keeping the previous rules")
    assert "\n" not in errors[0].getMessage()
    # Fixed again: the new rules apply at once.
    policy.write_text('"placement:resource_providers:list": "!"\n')
    touch_later(policy)
    assert client.get("/resource_providers").status == 403


def test_policy_file_removed_while_running_keeps_the_old_rules(build_policy_client, caplog):
    client, policy = build_policy_client('"placement:resource_providers:list": "!"\n')
    assert client.get("/resource_providers").status == 403
    policy.unlink()
    with caplog.at_level(logging.ERROR, logger="billeting.placement.api.policy"):
        for _ in range(3):
            assert client.get("/resource_providers").status == 403
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1, caplog.text
    policy.write_text('"placement:resource_providers:list": "role:admin"\n')
    assert client.get("/resource_providers").status == 200


@pytest.fixture
def build_policy_client(db_url, engine, tmp_path):
    from billeting.config import Settings

    def build(text: str):
        policy = tmp_path / "policy.yaml"
        policy.write_text(text)
        app = make_app(Settings(db=db_url, policy_file=str(policy)), engine)
        return PlacementClient(app, mv="1.39"), policy

    return build


def test_invalid_policy_file_at_start_is_one_error(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:usages": [unclosed\n')
    with pytest.raises(PolicyFileError) as exc:
        Authorizer(policy_file=str(policy))
    assert str(exc.value).startswith(f"policy file {policy}: ")
    assert "\n" not in str(exc.value)
    result = run_cli("serve", "--db", f"sqlite:///{tmp_path / 'x.sqlite'}", "--policy-file", str(policy))
    assert result.returncode == 1
    assert one_line_error(result).startswith(f"billeting: error: invalid configuration: policy file {policy}: ")


def test_relative_policy_file_is_found_where_the_operator_is(tmp_path, monkeypatch):
    (tmp_path / "mine.yaml").write_text('"placement:traits:list": "role:reader"\n')
    monkeypatch.chdir(tmp_path)
    authorizer = Authorizer(policy_file="mine.yaml")
    assert authorizer.allowed(ctx("reader"), "placement:traits:list")
    assert not authorizer.allowed(ctx("admin"), "placement:traits:list")
