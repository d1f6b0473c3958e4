"""Through the compute API: a compute that disabled itself after failed
builds shows why in os-services, and an operator's enable there brings it
back (trait gone from Placement, a candidate again)."""
from __future__ import annotations

from billeting.compute.build_health import auto_disabled_reason
from billeting.compute.driver import node_uuid
from billeting.compute.fake import FakeConfig
from billeting.compute.settings import ComputeSettings
from billeting.compute.traits import DISABLED
from tests.support.wait import wait_for



def test_os_services_shows_the_self_disable_and_an_enable_undoes_it(deployment, plane_factory):
    bad = deployment.compute("bad", config=FakeConfig(vcpus=64, memory_mb=262144, disk_gb=2000, failure_rate=1.0),
                             settings=ComputeSettings(consecutive_build_service_disable_threshold=1))
    p = plane_factory(computes=1)
    p.flavor()
    uuid = p.boot(name="first")
    wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE after the reschedule")
    assert p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["OS-EXT-SRV-ATTR:host"] == "host1"

    def bad_service() -> dict:
        return next(s for s in p.call("GET", "/v2.1/os-services?binary=nova-compute").json["services"]
                    if s["host"] == "bad")

    shown = wait_for(lambda: (s := bad_service())["status"] == "disabled" and s, what="bad disabled")
    assert shown["disabled_reason"] == auto_disabled_reason(1)
    wait_for(lambda: DISABLED in deployment.placement.get_traits(node_uuid("bad")).traits,
             what="the disabled trait (written after the record)")

    r = p.call("PUT", f"/v2.1/os-services/{shown['id']}", {"status": "enabled"})
    assert r.status_code == 200 and r.json["service"]["status"] == "enabled", r.text
    assert r.json["service"]["disabled_reason"] is None
    wait_for(lambda: DISABLED not in deployment.placement.get_traits(node_uuid("bad")).traits,
             what="the trait to go")
    assert bad.health.failures == 0
