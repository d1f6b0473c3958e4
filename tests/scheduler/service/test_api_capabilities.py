"""Host capabilities through the HTTP API: reported with PUT /hosts/{name},
kept in the API database, read by ComputeCapabilitiesFilter and
ImagePropertiesFilter when POST /selections places a Nova-form request."""
from __future__ import annotations

import pytest

from tests.scheduler.service.conftest import new_uuid, simple_request

KVM = {
    "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
    "cpu_info": {"arch": "x86_64", "vendor": "AMD", "features": ["avx2", "sev"],
                 "topology": {"sockets": 1, "cores": 32, "threads": 2}, "maxphysaddr": {"bits": 48}},
    "supported_instances": [["x86_64", "kvm", "hvm"]],
    "stats": {"gpu": "mi300", "numa": "{\"nodes\": 2}"},
}
OLD_XEN = {"hypervisor_type": "Xen", "hypervisor_version": 4011000,
           "supported_instances": [["x86_64", "xen", "xen"]], "cpu_info": {"vendor": "Intel"}}


@pytest.fixture
def reported(api, fleet):
    for name in ("kvm", "xen", "quiet"):
        fleet.add(name, vcpu=8)
    assert api.put("/hosts/kvm", json={"heartbeat": True, **KVM}).status == 201
    assert api.put("/hosts/xen", json=OLD_XEN).status == 201
    return fleet


def place(api, flavor_specs=None, image=None) -> set[str] | str:
    """Where one Nova-form request lands, five times over (each released), or the 409's detail."""
    found = set()
    for _ in range(5):
        body = {"instance_uuids": [new_uuid()], "flavor": {"vcpus": 1, "memory_mb": 256,
                                                           "extra_specs": flavor_specs or {}}}
        if image is not None:
            body["image"] = {"properties": image}
        resp = api.post("/selections", json={**body, "dry_run": True})
        if resp.status == 409:
            return resp.error["detail"]
        assert resp.status == 200, resp
        found.add(resp.json["hosts"][0]["host"])
    return found


def test_reported_capabilities_are_kept_and_shown(api, reported):
    shown = api.get("/hosts/kvm").json
    assert shown["cpu_info"] == KVM["cpu_info"] and shown["supported_instances"] == [["x86_64", "kvm", "hvm"]]
    assert shown["stats"] == KVM["stats"] and shown["hypervisor_version"] == 8002000
    record = shown["record"]
    assert record["hypervisor_type"] == "QEMU" and record["cpu_info"]["maxphysaddr"] == {"bits": 48}


def test_selections_follow_the_reported_capabilities(api, reported):
    assert place(api, {"capabilities:cpu_info:features": "<in> sev"}) == {"kvm"}
    assert place(api, {"capabilities:numa:nodes": ">= 2"}) == {"kvm"}           # a stat holding JSON text
    assert place(api, {"capabilities:hypervisor_type": "<or> Xen <or> QEMU",
                       "capabilities:hypervisor_version": "<= 5000000"}) == {"xen"}
    assert place(api, image={"hw_vm_mode": "xen"}) == {"xen"}
    assert place(api, image={"img_hv_type": "kvm", "img_hv_requested_version": ">=8.0"}) == {"kvm"}
    detail = place(api, {"capabilities:cpu_info:vendor": "Ampere"})
    assert "3 lacked the capabilities the flavor's extra specs ask for" in detail
    detail = place(api, image={"hw_architecture": "aarch64"})
    assert "3 could not run the image" in detail


def test_the_typed_form_carries_image_properties_too(api, reported):
    resp = api.post("/selections", json=simple_request(image_properties={"hw_vm_mode": "xen"}, dry_run=True))
    assert resp.status == 200, resp
    assert [h["host"] for h in resp.json["hosts"]] == ["xen"]


@pytest.mark.parametrize("body", [
    {"supported_instances": [["x86_64", "kvm"]]},
    {"supported_instances": "x86_64"},
    {"stats": {"gpu": 3}},
    {"stats": {"a:b": "x"}},
    {"cpu_info": "avx2"},
    {"hypervisor_version": -1},
    {"cpu_info": {"blob": "x" * 20000}},
])
def test_malformed_capabilities_are_400(api, body):
    resp = api.put("/hosts/h1", json=body)
    assert resp.status == 400, resp


def test_the_default_architecture_setting(tmp_path):
    from billeting.scheduler.service import config as config_mod

    assert config_mod.load({}, {}).scheduler_settings().image_properties_default_architecture is None
    ini = tmp_path / "scheduler.conf"
    ini.write_text("[filter_scheduler]\nimage_properties_default_architecture = x86_64\n")
    loaded = config_mod.load({"config_file": str(ini)}, {}).scheduler_settings()
    assert loaded.image_properties_default_architecture == "x86_64"
    env = {"BILLETING_SCHEDULER_IMAGE_PROPERTIES_DEFAULT_ARCHITECTURE": "aarch64"}
    assert config_mod.load({}, env).scheduler_settings().image_properties_default_architecture == "aarch64"
