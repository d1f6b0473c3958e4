"""``billeting up`` as a user runs it, driven over HTTP with curl-like calls and with openstacksdk."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import requests
import pytest

from tests.serving.refusals import cases, send
from tests.support.wait import wait_for


def _free_base() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base < 60000:
            ok = True
            for off in range(6):  # compute API, Keystone, image, (unused), Placement, scheduler
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", base + off))
                    except OSError:
                        ok = False
            if ok:
                return base


@pytest.fixture
def up(tmp_path):
    base = _free_base()
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "billeting"), "up", "--cells", "2", "--computes", "4",
                             "--port-base", str(base), "--state-dir", str(tmp_path / "state"),
                             # the noauth2 tokens these tests send (tests/api/compute/test_openstack_cli.py: Keystone)
                             "--auth", "noauth2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("ready"):
            break
    else:
        raise AssertionError("billeting up never got ready:\n" + "".join(lines))
    url = f"http://127.0.0.1:{base}"
    yield url, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


class _Client:
    def __init__(self, base: str, headers: dict) -> None:
        self.base, self.s = base, requests.Session()
        self.s.headers.update(headers)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.s.close()

    def get(self, path):
        return self.s.get(self.base + path, timeout=30)

    def post(self, path, json):
        return self.s.post(self.base + path, json=json, timeout=30)

    def delete(self, path):
        return self.s.delete(self.base + path, timeout=30)


def test_up_builds_a_server_and_stops_on_sigint(up):
    url, proc = up
    h = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.90"}
    with _Client(url, h) as c:
        assert c.get("/").json()["versions"][0]["version"] == "2.91"
        r = c.post("/v2.1/flavors", json={"flavor": {"name": "small", "ram": 2048, "vcpus": 2, "disk": 20,
                                                     "id": "1"}})
        assert r.status_code == 200, r.text
        r = c.post("/v2.1/servers", json={"server": {"name": "vm", "flavorRef": "1", "imageRef": "cirros",
                                                     "networks": "none"}})
        assert r.status_code == 202 and r.headers["location"].endswith(r.json()["server"]["id"])
        uuid = r.json()["server"]["id"]
        wait_for(lambda: c.get(f"/v2.1/servers/{uuid}").json()["server"]["status"] == "ACTIVE", what="ACTIVE")
        assert c.delete(f"/v2.1/servers/{uuid}").status_code == 204
        wait_for(lambda: c.get(f"/v2.1/servers/{uuid}").status_code == 404, what="deleted")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped" in out


def test_openstacksdk_drives_the_compute_api(up):
    openstack = pytest.importorskip("openstack")
    url, proc = up
    conn = openstack.connection.Connection(
        auth_type="admin_token", auth={"token": "admin", "endpoint": f"{url}/v2.1"},
        compute_endpoint_override=f"{url}/v2.1", identity_api_version="3")
    flavor = conn.compute.create_flavor(name="sdk", ram=1024, vcpus=1, disk=10, id="sdk")
    assert conn.compute.get_flavor("sdk").ram == 1024
    group = conn.compute.create_server_group(name="g", policy="anti-affinity")
    assert conn.compute.get_server_group(group.id).name == "g"
    server = conn.compute.create_server(name="sdk-vm", flavor_id=flavor.id, image_id="cirros", networks="none")
    server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.5)
    assert server.status == "ACTIVE"
    assert [s.id for s in conn.compute.servers(name="sdk-vm")] == [server.id]
    assert {s.binary for s in conn.compute.services()} == {"nova-compute", "nova-conductor"}

    # Resize + confirm, then a live migration, through the compute proxy.
    big = conn.compute.create_flavor(name="sdk-big", ram=2048, vcpus=2, disk=20, id="sdk-big")
    source = conn.compute.get_server(server.id).compute_host
    conn.compute.resize_server(server, big.id)
    server = conn.compute.wait_for_server(server, status="VERIFY_RESIZE", wait=60, interval=0.5)
    assert server.compute_host != source and server.flavor.original_name == "sdk-big"
    migration, = [m for m in conn.compute.migrations() if m.server_id == server.id]
    assert (migration.migration_type, migration.status) == ("resize", "finished")
    conn.compute.confirm_server_resize(server)
    server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.5)
    assert server.flavor.original_name == "sdk-big"
    before = server.compute_host
    conn.compute.live_migrate_server(server, host=None, block_migration="auto")
    wait_for(lambda: (s := conn.compute.get_server(server.id)).status == "ACTIVE" and s.task_state is None
             and s.compute_host != before, what="live-migrated")
    actions = {a.action for a in conn.compute.server_actions(server)}
    assert {"create", "resize", "confirmResize", "live-migration"} <= actions

    # Take a compute out of scheduling and put it back.
    service = next(s for s in conn.compute.services() if s.binary == "nova-compute")
    disabled = conn.compute.disable_service(service, service.host, service.binary, disabled_reason="maint")
    assert disabled.status == "disabled"
    listed = next(s for s in conn.compute.services() if s.id == service.id)
    assert (listed.status, listed.disabled_reason) == ("disabled", "maint")
    assert conn.compute.enable_service(service, service.host, service.binary).status == "enabled"

    # A host aggregate with a zone (openstack aggregate create --zone ...); a server asked into it lands there.
    agg = conn.compute.create_aggregate(name="sdk-agg", availability_zone="sdk-az")
    agg = conn.compute.add_host_to_aggregate(agg, service.host)
    assert agg.hosts == [service.host] and agg.availability_zone == "sdk-az"
    assert conn.compute.set_aggregate_metadata(agg, {"k": "v"}).metadata == {"availability_zone": "sdk-az", "k": "v"}
    assert conn.compute.find_aggregate("sdk-agg").id == agg.id
    zoned = conn.compute.create_server(name="sdk-zoned", flavor_id=flavor.id, image_id="cirros", networks="none",
                                       availability_zone="sdk-az")
    zoned = conn.compute.wait_for_server(zoned, status="ACTIVE", wait=60, interval=0.5)
    assert (zoned.compute_host, zoned.availability_zone) == (service.host, "sdk-az")
    conn.compute.delete_server(zoned)
    conn.compute.wait_for_delete(zoned, wait=60, interval=0.5)
    conn.compute.delete_aggregate(conn.compute.remove_host_from_aggregate(agg, service.host))
    assert list(conn.compute.aggregates()) == []
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, wait=60, interval=0.5)
    conn.close()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)


def test_up_survives_stalled_and_malformed_clients(up):
    """The all-in-one faces the same clients as `billeting serve`: stalled
    connections must not silence it, and what the HTTP front refuses comes
    back in each service's own error format."""
    url, proc = up
    base = int(url.rsplit(":", 1)[1])
    stalled = []
    for port in (base, base + 4, base + 5):
        for _ in range(12):  # more than the 8 application threads of each service
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v2.1/servers HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"ser")
            stalled.append(s)
    try:
        h = {"X-Auth-Token": "admin"}
        with _Client(url, h) as c:
            assert c.get("/v2.1/flavors").status_code == 200
        assert requests.get(f"http://127.0.0.1:{base + 4}/", timeout=10).status_code == 200
        # Malformed framing: the front answers in Nova's format on the compute API...
        with socket.create_connection(("127.0.0.1", base)) as s:
            s.sendall(b"GET /v2.1 HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
            reply = s.recv(65536).decode("latin-1")
        assert reply.startswith("HTTP/1.1 400"), reply
        assert '"badRequest"' in reply and '"code":400' in reply, reply
        # ...and in Placement's on Placement.
        with socket.create_connection(("127.0.0.1", base + 4)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
            reply = s.recv(65536).decode("latin-1")
        assert reply.startswith("HTTP/1.1 400") and '"errors"' in reply, reply
        # Every kind of refusal, in each service's format: Nova's (its code is
        # the status), Placement's (no microversion, so no code) and the
        # scheduler's (Placement's document, always with a billeting code).
        for case in cases():
            answer = send(base, case)
            [(_fault, nova)] = answer.json.items()
            assert nova["code"] == case.status and nova["message"], (case.name, nova)
            assert answer.headers["x-compute-request-id"].startswith("req-"), case.name
            err = send(base + 4, case).error
            assert "code" not in err and err["request_id"].startswith("req-"), (case.name, err)
            err = send(base + 5, case).error
            assert err["code"] == f"billeting.{case.code}" and err["request_id"].startswith("req-"), (case.name, err)
    finally:
        for s in stalled:
            s.close()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0


@pytest.mark.parametrize("flags, message", [
    (["--cells", "0"], "--cells must be at least 1"),
    (["--computes", "-1"], "--computes must be at least 0"),
    (["--failure-rate", "1.5"], "--failure-rate must be between 0 and 1"),
    (["--build-time", "-1"], "--build-time must be at least 0"),
    (["--port-base", "65533"], "--port-base must be between 1 and 65530"),
    (["--scheduler-config", "/nonexistent/scheduler.conf"], "cannot read config file /nonexistent/scheduler.conf"),
    (["--scheduler-config", "BINARY"], "it is not UTF-8 text"),
    (["--scheduler-config", "NO_HEADER"], "line 1: a [section] header must come first"),
    (["--log-level", "LOUD"], "--log-level must be DEBUG, INFO, WARNING or ERROR"),
])
def test_up_refuses_bad_flags_as_usage_errors_before_starting(tmp_path, capsys, flags, message):
    from billeting.cli import main

    (tmp_path / "binary.conf").write_bytes(b"\x8a\xff\x00")
    (tmp_path / "no-header.conf").write_text("[scheduler\ntopology_levels = rack\n")
    files = {"BINARY": str(tmp_path / "binary.conf"), "NO_HEADER": str(tmp_path / "no-header.conf")}
    state = tmp_path / "state"
    assert main(["up", "--state-dir", str(state), *[files.get(f, f) for f in flags]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not state.exists()  # nothing was made


def test_up_refuses_to_empty_a_state_dir_holding_other_files(tmp_path, capsys):
    from billeting.cli import main
    from billeting.commands.up import state_dir_problem

    (tmp_path / "notes.txt").write_text("mine")
    assert main(["up", "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds files billeting up did not make (notes.txt)" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert "is not a directory" in state_dir_problem(str(tmp_path / "notes.txt"))
    earlier = tmp_path / "earlier"  # what an earlier run left: emptied as before
    earlier.mkdir()
    for name in ("placement.sqlite", "api.sqlite", "cell0.sqlite", "cell12.sqlite", "cell12.sqlite-wal"):
        (earlier / name).touch()
    assert state_dir_problem(str(earlier)) is None and state_dir_problem(str(tmp_path / "new")) is None


def test_up_takes_the_schedulers_settings_from_a_config_file(tmp_path, capsys):
    from billeting.commands import up as up_mod
    from billeting.cli import main

    conf = tmp_path / "scheduler.conf"
    conf.write_text("[filter_scheduler]\nenabled_filters = ComputeFilter, AggregateInstanceExtraSpecsFilter\n"
                    "ram_weight_multiplier = -1.0\n[scheduler]\ntopology_levels = rack, hall\n")
    settings = up_mod.scheduler_settings(str(conf))
    assert settings.enabled_filters == ("ComputeFilter", "AggregateInstanceExtraSpecsFilter")
    assert settings.multiplier("ram_weight_multiplier") == -1.0 and settings.topology_levels == ("rack", "hall")
    conf.write_text("[filter_scheduler]\nenabled_filters = NoSuchFilter\n")
    state = tmp_path / "state"
    assert main(["up", "--state-dir", str(state), "--scheduler-config", str(conf)]) == 2
    assert "unknown scheduler filter(s): NoSuchFilter" in capsys.readouterr().err
    assert not state.exists()



def test_a_second_up_on_the_same_state_dir_is_refused_and_empties_nothing(up, tmp_path):
    url, proc = up
    h = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.90"}
    with _Client(url, h) as c:
        r = c.post("/v2.1/flavors", json={"flavor": {"name": "kept", "ram": 512, "vcpus": 1, "disk": 1, "id": "7"}})
        assert r.status_code == 200, r.text
        second = subprocess.run([os.path.join(os.path.dirname(sys.executable), "billeting"), "up", "--computes", "1",
                                 "--port-base", str(_free_base()), "--state-dir", str(tmp_path / "state")],
                                capture_output=True, text=True, timeout=20)
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1 and f"in use by another billeting up (pid {proc.pid})" in second.stderr
        assert c.get("/v2.1/flavors/7").json()["flavor"]["name"] == "kept"  # the first's databases are whole


def test_up_names_a_busy_port_and_its_service_before_starting_anything(tmp_path, capsys):
    from billeting.cli import main

    base, state = _free_base(), tmp_path / "state"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 5))
        taken.listen()
        assert main(["up", "--cells", "1", "--computes", "2", "--port-base", str(base),
                     "--state-dir", str(state)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the scheduler cannot listen on 127.0.0.1:{base + 5}" in err, err
    assert [p.name for p in state.iterdir()] == ["billeting-up.lock"]  # no database, no compute was made
