"""An answer that is not what Placement answers (a URL that is some other
service, a proxy's error page sent as 200) is Placement being unusable: the
client raises ``PlacementUnavailable``, a decision fails as
``PlacementTrouble`` (503 over HTTP), and the RPC front door sends it back
typed, never as a malformed-request or internal error."""
from __future__ import annotations

import random

import msgspec
import pytest

from billeting.placement_client.client import PlacementClient, PlacementUnavailable
from billeting.placement_client.model import CandidateQuery, Inventory, RequestGroup
from billeting.placement_client.transport import Response
from billeting.scheduler import PlacementTrouble, Scheduler, ScheduleRequest, SchedulerSettings
from billeting.scheduler.catalog import PlacementHostCatalog
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler.rpc import ErrorInfo, _raise_typed, _typed_failure

HOST = "00000000-0000-4000-8000-000000000001"
ROOT = msgspec.json.encode({"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0",
                                          "status": "CURRENT", "links": []}]})
PROVIDERS = msgspec.json.encode({"resource_providers": [
    {"uuid": HOST, "name": "h1", "generation": 1, "root_provider_uuid": HOST, "parent_provider_uuid": None}]})
CANDIDATES = msgspec.json.encode({
    "allocation_requests": [{"allocations": {HOST: {"resources": {"VCPU": 1}}}, "mappings": {"": [HOST]}}],
    "provider_summaries": {HOST: {"resources": {"VCPU": {"capacity": 8, "used": 0}}, "traits": [],
                                  "parent_provider_uuid": None, "root_provider_uuid": HOST}}})
HTML = b"<html><body>502 Bad Gateway</body></html>"


class Scripted:
    """Answers by path prefix; every answer is a 200."""

    def __init__(self, **bodies: bytes) -> None:
        self.bodies = {"/": ROOT, "/resource_providers": PROVIDERS, "/allocation_candidates": CANDIDATES,
                       **{"/" + k: v for k, v in bodies.items()}}

    def request(self, method, path, body, headers):
        prefix = "/" + path.lstrip("/").split("?")[0].split("/")[0]
        return Response(200, {"content-type": "application/json"}, self.bodies[prefix])

    def close(self):
        pass


READS = {
    "allocation_candidates": lambda c: c.allocation_candidates(
        CandidateQuery(groups=(RequestGroup(resources={"VCPU": 1}),))),
    "get_allocations": lambda c: c.get_allocations(HOST),
    "list_providers": lambda c: c.list_providers(),
    "get_provider": lambda c: c.get_provider(HOST),
    "provider_usages": lambda c: c.provider_usages(HOST),
    "get_inventories": lambda c: c.get_inventories(HOST),
    "get_traits": lambda c: c.get_traits(HOST),
    "get_aggregates": lambda c: c.get_aggregates(HOST),
    "put_inventories": lambda c: c.put_inventories(HOST, 1, {"VCPU": Inventory(8)}),
}


@pytest.mark.parametrize("body", [HTML, b"[1, 2]", b'"ok"'])
@pytest.mark.parametrize("read", sorted(READS))
def test_every_read_of_a_wrong_answer_raises_placement_unavailable(read, body):
    client = PlacementClient(Scripted(allocation_candidates=body, resource_providers=body, allocations=body))
    with pytest.raises(PlacementUnavailable, match="not what Placement answers"):
        READS[read](client)


@pytest.mark.parametrize("read, body", [
    ("allocation_candidates", b'{"allocation_requests": []}'),
    ("allocation_candidates", b'{"allocation_requests": [{"allocations": 5}], "provider_summaries": {}}'),
    ("list_providers", b"{}"),
    ("get_inventories", b'{"inventories": {"VCPU": {"total": "many"}}}'),
    ("put_inventories", b"{}"),
    ("put_inventories", b'{"resource_provider_generation": "x"}'),
])
def test_an_answer_missing_or_mistyping_a_field_raises_placement_unavailable(read, body):
    client = PlacementClient(Scripted(allocation_candidates=body, resource_providers=body))
    with pytest.raises(PlacementUnavailable, match="not what Placement answers"):
        READS[read](client)


def _scheduler(transport) -> Scheduler:
    client = PlacementClient(transport)
    directory = MemoryDirectory()
    return Scheduler(client, PlacementHostCatalog(client, directory), directory, SchedulerSettings(),
                     rng=random.Random(1))


def _request() -> ScheduleRequest:
    return ScheduleRequest(instance_uuids=("00000000-0000-4000-8000-0000000000aa",), project_id="p",
                           user_id="u", groups=(RequestGroup(resources={"VCPU": 1}),))


@pytest.mark.parametrize("broken", ["allocation_candidates", "resource_providers"])
def test_a_decision_on_a_wrong_answer_is_placement_trouble(broken):
    scheduler = _scheduler(Scripted(**{broken: HTML}))
    with pytest.raises(PlacementTrouble, match="not what Placement answers"):
        scheduler.select_destinations(_request(), alternates=0)
    with pytest.raises(PlacementTrouble):
        scheduler.dry_run(_request())


def test_rpc_sends_placement_errors_back_as_placement_trouble():
    def work():
        raise PlacementUnavailable(0, "connection refused")

    with pytest.raises(Exception) as sent:
        _typed_failure(work)
    info = msgspec.json.decode(sent.value.payload, type=ErrorInfo)
    assert (info.kind, info.status) == ("PlacementTrouble", 503)
    with pytest.raises(PlacementTrouble, match="connection refused"):
        _raise_typed(_remote(sent.value))


def _remote(handler_error):
    from billeting.messaging.bus import RemoteError

    return RemoteError(handler_error.kind, handler_error.message, handler_error.payload)
