"""openstacksdk drives the lifecycle actions against ``billeting up`` (its
own processes, over HTTP), with Placement read over its HTTP API."""
from __future__ import annotations

import signal

import pytest
import requests

from tests.api.compute.test_up import up  # noqa: F401 - the fixture
from tests.support.wait import wait_for


def _held(url: str, server_id: str) -> dict:
    """The server's allocations as Placement's API shows them: provider → resources."""
    base, port = url.rsplit(":", 1)
    r = requests.get(f"{base}:{int(port) + 4}/allocations/{server_id}", headers={"X-Auth-Token": "admin"},
                     timeout=30)
    assert r.status_code == 200, r.text
    return {rp: a["resources"] for rp, a in r.json()["allocations"].items()}


def test_openstacksdk_drives_the_lifecycle_actions(up):  # noqa: F811 - the fixture
    openstack = pytest.importorskip("openstack")
    url, proc = up
    conn = openstack.connection.Connection(
        auth_type="admin_token", auth={"token": "admin", "endpoint": f"{url}/v2.1"},
        compute_endpoint_override=f"{url}/v2.1", identity_api_version="3", compute_api_version="2.91")
    flavor = conn.compute.create_flavor(name="sdk", ram=1024, vcpus=1, disk=10, id="sdk")
    server = conn.compute.create_server(name="sdk-vm", flavor_id=flavor.id, image_id="cirros", networks="none")
    server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.3)
    want = {"DISK_GB": 10, "MEMORY_MB": 1024, "VCPU": 1}
    assert list(_held(url, server.id).values()) == [want]

    conn.compute.stop_server(server)
    server = conn.compute.wait_for_server(server, status="SHUTOFF", wait=60, interval=0.3)
    assert server.power_state == 4 and list(_held(url, server.id).values()) == [want]
    conn.compute.start_server(server)
    server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.3)

    conn.compute.lock_server(server, locked_reason="sdk maintenance")
    server = conn.compute.get_server(server.id)
    assert server.is_locked and server.locked_reason == "sdk maintenance"
    conn.compute.unlock_server(server)
    assert not conn.compute.get_server(server.id).is_locked

    rebuilt = conn.compute.rebuild_server(server, image="avx2-image", name="sdk-rebuilt")
    assert rebuilt.id == server.id
    server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.3)
    assert (server.name, server.image.id) == ("sdk-rebuilt", "avx2-image")
    assert list(_held(url, server.id).values()) == [want]

    conn.compute.shelve_server(server)
    server = conn.compute.wait_for_server(server, status="SHELVED_OFFLOADED", wait=60, interval=0.3)
    assert server.compute_host is None and _held(url, server.id) == {}
    conn.compute.unshelve_server(server)
    server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.3)
    assert server.compute_host and list(_held(url, server.id).values()) == [want]

    actions = [a.action for a in conn.compute.server_actions(server)]
    assert {"create", "stop", "start", "lock", "unlock", "rebuild", "shelve", "unshelve"} <= set(actions)
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, wait=60, interval=0.3)
    wait_for(lambda: _held(url, server.id) == {}, what="the delete to free the allocation")
    conn.close()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
