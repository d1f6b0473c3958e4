"""The ``openstack`` CLI (python-openstackclient, osc-placement) against
``billeting up`` with its Keystone, in separate processes, as a user runs them:
the clouds.yaml ``billeting up`` writes is all the CLI is given."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.api.compute.test_up import _free_base

pytest.importorskip("keystone", reason="the identity extra (billeting[identity]) is not installed")
pytest.importorskip("openstackclient", reason="python-openstackclient (test extras) is not installed")
pytest.importorskip("osc_placement", reason="osc-placement (test extras) is not installed")

pytestmark = [
    pytest.mark.slow,
    # billeting up runs on its own SQLite files whatever the backend: once is enough.
    pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB", "sqlite") != "sqlite",
                       reason="billeting up uses embedded SQLite; runs in the SQLite pass"),
]

BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 240.0


class Up:
    def __init__(self, tmp_path: Path) -> None:
        self.base = _free_base()
        self.proc = subprocess.Popen(
            [str(BIN / "billeting"), "up", "--cells", "2", "--computes", "4", "--port-base", str(self.base),
             "--state-dir", str(tmp_path / "state"), "--auth", "keystone"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        deadline = time.monotonic() + READY_TIMEOUT_S
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("ready") or time.monotonic() > deadline:
                break
        if not self.lines or not self.lines[-1].startswith("ready"):
            self.proc.kill()
            raise AssertionError("billeting up never got ready:\n" + "".join(self.lines))
        found = re.search(r"^clouds\.yaml +(\S+);", "".join(self.lines), re.M)
        assert found, "".join(self.lines)
        self.clouds_yaml = Path(found[1])
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        self.env.update(OS_CLIENT_CONFIG_FILE=str(self.clouds_yaml), OS_CLOUD="billeting",
                        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")

    def openstack(self, *args: str):
        """Run ``openstack ARGS -f json``; its parsed output."""
        done = subprocess.run(["openstack", *args, "-f", "json"], env=self.env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"openstack {' '.join(args)}: {done.stderr}"
        return json.loads(done.stdout)

    def token(self) -> str:
        return self.openstack("token", "issue")["id"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def up(tmp_path):
    running = Up(tmp_path)
    yield running
    running.close()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _wait_closed(port: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _listening(port):
            return True
        time.sleep(0.2)
    return False


def test_the_openstack_cli_drives_billeting_up(up):
    # the clouds.yaml holds the admin's password: for its owner only
    assert up.clouds_yaml.stat().st_mode & 0o077 == 0
    assert "billeting:" in "".join(up.lines)  # the entry is printed too

    up.openstack("flavor", "create", "--ram", "1024", "--vcpus", "1", "--disk", "10", "small")
    assert [f["Name"] for f in up.openstack("flavor", "list")] == ["small"]

    server = up.openstack("server", "create", "--flavor", "small", "--image", "cirros", "--nic", "none",
                          "--wait", "vm1")
    assert server["status"] == "ACTIVE" and server["image"].startswith("cirros")
    listed = up.openstack("server", "list")
    assert [(s["Name"], s["Status"], s["Image"], s["Flavor"]) for s in listed] == [
        ("vm1", "ACTIVE", "cirros", "small")]

    hosts = sorted(h["Hypervisor Hostname"] for h in up.openstack("hypervisor", "list"))
    assert hosts == ["compute01", "compute02", "compute03", "compute04"]
    providers = sorted(p["name"] for p in up.openstack("resource", "provider", "list"))
    assert providers == hosts
    # the server's allocation is in Placement, against the host it runs on
    usage = {p["name"]: p["uuid"] for p in up.openstack("resource", "provider", "list")}
    host = up.openstack("server", "show", "vm1")["OS-EXT-SRV-ATTR:host"]
    used = {u["resource_class"]: u["usage"]
            for u in up.openstack("resource", "provider", "usage", "show", usage[host])}
    assert (used["VCPU"], used["MEMORY_MB"]) == (1, 1024)

    zones = {(z["Zone Name"], z["Zone Status"]) for z in up.openstack("availability", "zone", "list")}
    assert ("nova", "available") in zones

    # Every API checks tokens with Keystone: the noauth2 token of --auth noauth2 is refused,
    # a Keystone token is taken (the scheduler's own API, which the CLI does not cover).
    base = up.base
    for url in (f"http://127.0.0.1:{base}/v2.1/servers", f"http://127.0.0.1:{base + 4}/resource_providers",
                f"http://127.0.0.1:{base + 5}/server_groups", f"http://127.0.0.1:{base + 2}/v2/images"):
        assert requests.get(url, headers={"X-Auth-Token": "admin"}, timeout=30).status_code == 401, url
        assert requests.get(url, headers={"X-User-Id": "admin", "X-Roles": "admin"},
                            timeout=30).status_code == 401, url
    token = up.token()
    groups = requests.get(f"http://127.0.0.1:{base + 5}/server_groups", headers={"X-Auth-Token": token}, timeout=30)
    assert groups.status_code == 200, groups.text

    up.proc.send_signal(signal.SIGINT)
    out, _ = up.proc.communicate(timeout=60)
    assert up.proc.returncode == 0 and "stopped" in out
    assert _wait_closed(base + 1), "Keystone still listens after billeting up stopped"


def test_a_killed_billeting_up_leaves_no_keystone_behind(up):
    assert _listening(up.base + 1)
    up.proc.kill()
    up.proc.wait()
    assert _wait_closed(up.base + 1), "Keystone outlived a SIGKILLed billeting up"


def test_sigterm_while_keystone_bootstraps_stops_both_at_once(tmp_path):
    """SIGTERM between Keystone's launch and its answer: billeting up stops
    waiting for it, stops what it started and exits; Keystone goes too."""
    base = _free_base()
    state = tmp_path / "state"
    proc = subprocess.Popen([str(BIN / "billeting"), "up", "--cells", "1", "--computes", "1", "--port-base",
                             str(base), "--state-dir", str(state), "--auth", "keystone"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log = state / "identity" / "keystone.log"
        deadline = time.monotonic() + 60
        while not log.exists() and time.monotonic() < deadline:  # the child is launched
            time.sleep(0.05)
        assert log.exists()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "ready" not in out
    assert proc.returncode == 1 and "stopped before Keystone answered" in out, out
    assert _wait_closed(base + 1), "Keystone outlived billeting up"
    assert not _listening(base), "the compute API was started after all"
