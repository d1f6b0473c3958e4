"""The pieces of ``billeting up``'s identity that need no running Keystone:
the files it writes, the image catalog's API, and the checks made before start."""
from __future__ import annotations

import argparse

import falcon.testing
import pytest
import yaml

from billeting.commands import up
from billeting.api.image.app import make_app as image_app
from billeting.apidb import images
from billeting.identity.layout import IdentityLayout


def test_the_identity_files_are_private_and_name_the_same_cloud(tmp_path):
    layout = IdentityLayout.new(tmp_path, "0.0.0.0", 18775)
    layout.write()
    for path in (layout.keystone_conf, layout.authtoken_conf, layout.clouds_yaml):
        assert path.stat().st_mode & 0o077 == 0, path
    cloud = yaml.safe_load(layout.clouds_yaml.read_text())["clouds"]["billeting"]
    # a wildcard listen address is not one a client can reach
    assert cloud["auth"]["auth_url"] == "http://127.0.0.1:18775/v3"
    assert cloud["auth"]["password"] == layout.admin_password and len(layout.admin_password) >= 20
    authtoken = layout.authtoken_conf.read_text()
    assert f"password = {layout.admin_password}" in authtoken and "auth_url = http://127.0.0.1:18775/v3" in authtoken
    assert "interface = public" in authtoken  # the catalog has public endpoints only
    assert f"sqlite:///{tmp_path / 'identity' / 'keystone.sqlite'}" in layout.keystone_conf.read_text()
    # a new password at each start, unless one is given
    assert IdentityLayout.new(tmp_path, "::", 1).admin_password != layout.admin_password
    pinned = IdentityLayout.new(tmp_path, "::", 1, "s3cret")
    assert pinned.admin_password == "s3cret" and pinned.auth_url == "http://[::1]:1/v3"


@pytest.fixture
def image_client(api_engine):
    images.put(api_engine, "cirros", name="cirros", disk_format="qcow2")
    images.put(api_engine, "avx2-image", name="avx2", disk_format="raw",
               properties={"trait:HW_CPU_X86_AVX2": "required"})
    return falcon.testing.TestClient(image_app(api_engine))


def test_the_image_api_shows_the_catalog_as_glance_does(image_client):
    one = image_client.simulate_get("/v2/images/avx2-image")
    assert one.status_code == 200
    assert (one.json["name"], one.json["disk_format"], one.json["status"]) == ("avx2", "raw", "active")
    assert one.json["trait:HW_CPU_X86_AVX2"] == "required"  # properties sit beside the fields
    by_name = image_client.simulate_get("/v2/images", params={"name": "cirros"}).json["images"]
    assert [i["id"] for i in by_name] == ["cirros"]
    by_ids = image_client.simulate_get("/v2/images", params={"id": "in:cirros,avx2-image,gone"}).json["images"]
    assert sorted(i["id"] for i in by_ids) == ["avx2-image", "cirros"]
    assert len(image_client.simulate_get("/v2/images", params={"limit": "1"}).json["images"]) == 1
    versions = image_client.simulate_get("/").json["versions"]
    assert versions[0]["status"] == "CURRENT" and versions[0]["links"][0]["href"].endswith("/v2/")


def test_the_image_api_answers_bad_input_with_its_own_errors(image_client):
    missing = image_client.simulate_get("/v2/images/nope")
    assert missing.status_code == 404 and missing.json == {"code": 404, "title": "Not Found",
                                                           "message": "No image found with ID nope"}
    for limit in ("x", "-1", "1001"):
        bad = image_client.simulate_get("/v2/images", params={"limit": limit})
        assert bad.status_code == 400 and "limit must be an integer" in bad.json["message"], limit
    assert image_client.simulate_get("/v2/images/nope/elsewhere").status_code == 404


def _args(**given) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    up.register(parser.add_subparsers())
    return parser.parse_args(["up", *[f"--{k.replace('_', '-')}={v}" for k, v in given.items()]])


def test_keystone_is_asked_for_only_where_it_is_installed(monkeypatch):
    monkeypatch.setattr(up, "keystone_installed", lambda: False)
    assert up.usage_problem(_args(auth="keystone")) == (
        "--auth keystone needs the keystone package: pip install 'billeting[identity]'")
    default = _args()
    assert up.usage_problem(default) is None and up.auth_strategy(default) == "noauth2"
    assert [label for label, _ in up.service_ports(default)] == ["compute API", "image", "Placement", "scheduler"]
    monkeypatch.setattr(up, "keystone_installed", lambda: True)
    default = _args(port_base=9000)
    assert up.auth_strategy(default) == "keystone"
    assert dict(up.service_ports(default)) == {"compute API": 9000, "identity": 9001, "image": 9002,
                                               "Placement": 9004, "scheduler": 9005}
    assert up.usage_problem(_args(admin_password="")) == "--admin-password must not be empty"


def test_an_earlier_runs_identity_directory_does_not_make_the_state_dir_foreign(tmp_path):
    (tmp_path / "identity").mkdir()
    (tmp_path / "identity" / "keystone.sqlite").write_text("")
    (tmp_path / "api.sqlite").write_text("")
    assert up.state_dir_problem(str(tmp_path)) is None
    (tmp_path / "notes").mkdir()
    assert "holds files billeting up did not make (notes)" in up.state_dir_problem(str(tmp_path))


AUTHTOKEN = """\
[keystone_authtoken]
www_authenticate_uri = http://keystone.invalid:5000/v3
auth_url = http://keystone.invalid:5000/v3
auth_type = password
username = nova
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
"""


@pytest.mark.filterwarnings("ignore")
def test_keystone_protected_opens_only_the_version_documents(tmp_path, monkeypatch):
    from keystonemiddleware import auth_token

    from billeting.common.keystone_auth import COMPUTE_OPEN, keystone_protected

    conf = tmp_path / "authtoken.conf"
    conf.write_text(AUTHTOKEN)
    seen: list[dict] = []

    def app(environ, start_response):
        seen.append({k: v for k, v in environ.items() if k.startswith("HTTP_X_")})
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    def fetch_token(self, token, **kwargs):
        if token != "good":
            raise auth_token.InvalidToken("Token authorization failed")
        from tests.placement.api.test_auth_policy_cors import v3_token
        return v3_token("alice", ["member", "reader"], project="p1")

    monkeypatch.setattr(auth_token.AuthProtocol, "fetch_token", fetch_token)
    client = falcon.testing.TestClient(keystone_protected(app, str(conf), COMPUTE_OPEN))
    for path in ("/", "/v2.1", "/v2.1/", "/metrics"):
        assert client.simulate_get(path).status_code == 200, path
    assert client.simulate_get("/v2.1/servers").status_code == 401
    assert client.simulate_get("/v2.1/servers", headers={"X-Auth-Token": "admin"}).status_code == 401
    seen.clear()
    ok = client.simulate_get("/v2.1/servers", headers={"X-Auth-Token": "good", "X-Roles": "admin",
                                                       "X-User-Id": "root"})
    assert ok.status_code == 200
    # what the app sees is Keystone's word, not the client's
    assert seen[0]["HTTP_X_ROLES"] == "member,reader" and seen[0]["HTTP_X_PROJECT_ID"] == "p1"
    assert seen[0]["HTTP_X_USER_ID"] == "alice-id"


def test_compute_api_serve_with_keystone_needs_its_section(tmp_path, capsys, monkeypatch):
    from billeting.cli import main

    monkeypatch.delenv("BILLETING_CONFIG_FILE", raising=False)
    assert main(["compute-api", "serve", "--auth", "keystone"]) == 2
    assert "--auth keystone needs --config-file with a [keystone_authtoken] section" in capsys.readouterr().err
    conf = tmp_path / "billeting.conf"
    conf.write_text("[conductor]\nbuild_attempts = 2\n")
    assert main(["compute-api", "serve", "--auth", "keystone", "--config-file", str(conf)]) == 2
    assert "has no [keystone_authtoken] section" in capsys.readouterr().err


def test_a_stop_taken_before_the_wait_wins_over_a_keystone_that_answered_meanwhile():
    """``billeting up`` starts the other services while Keystone bootstraps,
    then waits for it. A SIGTERM taken during those starts must still stop
    it at the wait, even when Keystone has answered by then (CI saw "ready"
    printed after such a SIGTERM on a loaded machine)."""
    import threading

    import pytest

    from billeting.identity.process import IdentityFailed, KeystoneProcess

    answered = object.__new__(KeystoneProcess)  # no child: only the wait is under test
    answered.url, answered._ready = "http://127.0.0.1:1/v3", threading.Event()
    answered._ready.set()
    cancelled = threading.Event()
    assert answered.wait_ready(cancelled, timeout=1) == "http://127.0.0.1:1/v3"
    cancelled.set()
    with pytest.raises(IdentityFailed, match="stopped before Keystone answered"):
        answered.wait_ready(cancelled, timeout=1)
