"""``/allocations/{consumer_uuid}``, ``/allocations`` and
``/resource_providers/{uuid}/allocations`` (docs/design/placement-endpoints.md#allocations,
#provider-allocations)."""
from __future__ import annotations

import re

from billeting.placement import allocations
from billeting.placement.allocations import ConsumerWrite
from billeting.placement.api import util
from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import allocations as schemas
from billeting.placement.consumers import UNKNOWN_TYPE, Owner
from billeting.placement.store.tx import run_read, run_write


_UUID_KEY = re.compile(schemas.UUID_KEY.removeprefix("^").removesuffix("$"))


def check_uuid_keys(keys) -> None:
    """The schema's ``$`` also matches before a trailing newline (Python
    regex semantics); a 37-character key must not reach a 36-character column."""
    for key in keys:
        if not _UUID_KEY.fullmatch(key):
            raise HTTPProblem(400, f"JSON does not validate: {key!r} does not match '{schemas.UUID_KEY}'")


def consumer_write(mv: tuple[int, int], consumer_uuid: str, entry: dict) -> ConsumerWrite:
    """A validated dict-form consumer entry (PUT ≥ 1.12, POST, reshaper) as a domain write.
    ``mappings`` (≥ 1.34) is accepted and ignored; ``generation`` in provider entries too."""
    check_uuid_keys([consumer_uuid, *entry["allocations"]])
    if "mappings" in entry:
        util.validate(entry["mappings"], schemas.MAPPING_VALUES)
    return ConsumerWrite(
        consumer_uuid=consumer_uuid,
        resources={rp: dict(part["resources"]) for rp, part in entry["allocations"].items()},
        owner=Owner(entry["project_id"], entry["user_id"], entry.get("consumer_type")),
        check_generation=mv >= (1, 28),
        generation=entry.get("consumer_generation"),
    )


def _list_form_resources(items: list[dict]) -> dict[str, dict[str, int]]:
    """1.0–1.11 list form; a provider listed twice has its amounts added up."""
    merged: dict[str, dict[str, int]] = {}
    for item in items:
        target = merged.setdefault(item["resource_provider"]["uuid"], {})
        for rc, amount in item["resources"].items():
            target[rc] = target.get(rc, 0) + amount
    return merged


def write_allocations(resource: Resource, writes: list[ConsumerWrite], unknown_class_detail) -> None:
    """Run the domain write with the configured conflict retries; map an unknown
    resource class onto this endpoint's wording."""
    try:
        run_write(resource.engine, lambda conn: allocations.replace_allocations(conn, writes),
                  retries=resource.settings.allocation_conflict_retry_count)
    except allocations.UnknownResourceClass as exc:
        raise HTTPProblem(400, unknown_class_detail(exc)) from None


class ConsumerAllocations(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, consumer_uuid: str) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:allocations:list")
        mv = req.context.mv
        found = run_read(self.engine, lambda conn: allocations.for_consumer(conn, consumer_uuid))
        if found is None:
            util.send_json(req, resp, {"allocations": {}})
            return
        body: dict = {"allocations": {
            part.provider_uuid: {"generation": part.provider_generation, "resources": part.resources}
            for part in found.parts}}
        consumer = found.consumer
        if mv >= (1, 12):
            body["project_id"] = consumer.project_id
            body["user_id"] = consumer.user_id
        if mv >= (1, 28):
            body["consumer_generation"] = consumer.generation
        if mv >= (1, 38):
            body["consumer_type"] = consumer.consumer_type or UNKNOWN_TYPE
        util.send_json(req, resp, body, last_modified=found.last_modified)

    def on_put(self, req, resp, consumer_uuid: str) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:allocations:update")
        mv = req.context.mv
        if not util.is_uuid_like(consumer_uuid):
            raise HTTPProblem(400, f"Malformed consumer_uuid: {consumer_uuid}")
        consumer_uuid = util.normalize_uuid(consumer_uuid)
        body = util.read_json(req, schemas.put(mv))
        if mv >= (1, 12):
            write = consumer_write(mv, consumer_uuid, body)
        else:
            if mv >= (1, 8):
                owner = Owner(body["project_id"], body["user_id"])
            else:
                owner = Owner(self.settings.incomplete_consumer_project_id,
                              self.settings.incomplete_consumer_user_id)
            write = ConsumerWrite(consumer_uuid, _list_form_resources(body["allocations"]), owner)
        write_allocations(self, [write], lambda exc: (
            f"Unable to allocate inventory for consumer {exc.consumer_uuid}: {exc.detail}"))
        util.send_empty(resp)

    def on_delete(self, req, resp, consumer_uuid: str) -> None:
        util.authorize(req, "placement:allocations:delete")
        run_write(self.engine, lambda conn: allocations.delete_for_consumer(conn, consumer_uuid),
                  retries=self.settings.allocation_conflict_retry_count)
        util.send_empty(resp)


class AllocationsBulk(Resource):
    METHODS = ("POST",)

    def on_post(self, req, resp) -> None:
        util.require_version(req, (1, 13))
        util.require_json_content(req)
        util.authorize(req, "placement:allocations:manage")
        mv = req.context.mv
        body = util.read_json(req, schemas.post(mv))
        writes = [consumer_write(mv, uuid, entry) for uuid, entry in body.items()]
        write_allocations(self, writes, lambda exc: (
            f"Unable to allocate inventory No such resource class {exc.resource_class}."))
        util.send_empty(resp)


class ProviderAllocations(Resource):
    METHODS = ("GET",)

    def on_get(self, req, resp, uuid: str) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:allocations:list")
        mv = req.context.mv
        found = run_read(self.engine, lambda conn: allocations.for_provider(conn, uuid))
        listing: dict = {}
        for part in found.parts:
            entry: dict = {"resources": part.resources}
            if mv >= (1, 28):
                entry["consumer_generation"] = part.consumer_generation
            listing[part.consumer_uuid] = entry
        util.send_json(req, resp, {"allocations": listing,
                                   "resource_provider_generation": found.provider_generation},
                       last_modified=found.last_modified)
