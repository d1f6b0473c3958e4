"""Claims sent over Placement's HTTP layer (not the in-process shortcut)
decide like the in-process client, with or without a consumer type."""
from __future__ import annotations

import pytest

from billeting.placement.api.app import make_app
from billeting.placement_client.client import PlacementClient
from billeting.placement_client.transport import WsgiTransport
from billeting.scheduler.service.runtime import SchedulerService
from billeting.scheduler.settings import SchedulerSettings
from tests.scheduler.service.conftest import Fleet, new_uuid, simple_request


@pytest.mark.parametrize("consumer_type", [None, "INSTANCE"])
def test_select_through_placement_http(settings, engine, apidb, consumer_type):
    from billeting.scheduler.api.app import make_app as scheduler_app
    from tests.conftest import PlacementClient as WsgiClient

    client = PlacementClient(WsgiTransport(make_app(settings, engine)))
    assert client.version >= (1, 38)
    Fleet(client).add("h1")
    api = WsgiClient(scheduler_app(SchedulerService(client, apidb, SchedulerSettings())))
    inst = new_uuid()
    body = simple_request(inst, **({"consumer_type": consumer_type} if consumer_type else {}))
    resp = api.post("/selections", json=body)
    assert resp.status == 201, resp
    held = client.get_allocations(inst)
    assert held.allocations and held.consumer_type == (consumer_type or "unknown")
