"""A flavor asking for what the scheduler does not model (a guest NUMA
topology, huge pages, a PCI passthrough alias) is refused with a clear 400,
at create and at resize, rather than placed as if it had not asked."""
from __future__ import annotations

import pytest
from tests.support.wait import wait_for



@pytest.fixture
def p(plane_factory):
    p = plane_factory(computes=2)
    p.flavor(fid="1", name="small", ram=512, vcpus=1, disk=1)
    p.flavor(fid="numa", name="numa", ram=512, vcpus=2, disk=1)
    r = p.call("POST", "/v2.1/flavors/numa/os-extra_specs", {"extra_specs": {"hw:numa_nodes": "2"}})
    assert r.status_code == 200, r.text
    return p


def test_create_with_an_unmodelled_extra_spec_is_400_and_builds_nothing(p):
    r = p.call("POST", "/v2.1/servers", {"server": {"name": "vm", "flavorRef": "numa", "imageRef": "cirros",
                                                    "networks": "none"}})
    assert r.status_code == 400, r.text
    message = r.json["badRequest"]["message"]
    assert "flavor numa asks for hw:numa_nodes" in message and "not modelled" in message
    assert p.call("GET", "/v2.1/servers").json["servers"] == []


def test_resize_to_an_unmodelled_flavor_is_refused_and_the_server_stays(p):
    uuid = p.boot(flavor="1")
    wait_for(lambda: p.status(uuid) == "ACTIVE", what="the server to become ACTIVE")
    r = p.call("POST", f"/v2.1/servers/{uuid}/action", {"resize": {"flavorRef": "numa"}})
    assert r.status_code == 400, r.text
    assert "hw:numa_nodes" in r.text and "not modelled" in r.text
    assert p.status(uuid) == "ACTIVE"
