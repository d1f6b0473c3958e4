"""``/resource_providers/{uuid}/inventories[/{resource_class}]``
(docs/design/placement-endpoints.md#inventories)."""
from __future__ import annotations

import re

from billeting.placement import errors, inventories, providers
from billeting.placement.api import util
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import inventories as schemas
from billeting.placement.inventories import InventoryRecord
from billeting.placement.store.tx import run_read, run_write

_RC_NAME = re.compile(schemas.RC_PATTERN)


def _record_body(record: InventoryRecord) -> dict:
    return {
        "total": record.total,
        "reserved": record.reserved,
        "min_unit": record.min_unit,
        "max_unit": record.max_unit,
        "step_size": record.step_size,
        "allocation_ratio": float(record.allocation_ratio),
    }


def _single_body(found: inventories.InventoryAtGeneration) -> dict:
    return {**_record_body(found.record), "resource_provider_generation": found.generation}


def _collection_body(found: inventories.ProviderInventory) -> dict:
    return {
        "resource_provider_generation": found.generation,
        "inventories": {rc: _record_body(r) for rc, r in found.records.items()},
    }


def _collection_modified(found: inventories.ProviderInventory):
    return util.newest(*(r.last_modified for r in found.records.values()))


def build_record(resource_class: str, data: dict) -> InventoryRecord:
    """A record from a schema-valid write body; omitted fields take their defaults."""
    fields = {key: data[key] for key in schemas.FIELDS if key in data}
    if "allocation_ratio" in fields:
        fields["allocation_ratio"] = float(fields["allocation_ratio"])
    return InventoryRecord(resource_class=resource_class, **fields)


def _reserved_may_equal_total(req) -> bool:
    return req.context.mv >= (1, 26)


def _require_for_read(conn, uuid: str) -> providers.Provider:
    return providers.require(
        conn, uuid, f"No resource provider with uuid {uuid} found : No such resource provider {uuid}.")


class Inventories(Resource):
    METHODS = ("GET", "POST", "PUT", "DELETE")

    def on_get(self, req, resp, uuid: str) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:inventories:list")

        def work(conn):
            return inventories.get_all(conn, _require_for_read(conn, uuid))

        found = run_read(self.engine, work)
        util.send_json(req, resp, _collection_body(found), last_modified=_collection_modified(found))

    def on_post(self, req, resp, uuid: str) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:resource_providers:inventories:create")
        body = util.read_json_for_provider(req, schemas.POST, self.engine, uuid)
        record = build_record(body["resource_class"], body)
        equal_ok = _reserved_may_equal_total(req)

        def work(conn):
            provider = providers.require(conn, uuid)
            inventories.check_capacity(uuid, record, action="create", reserved_may_equal_total=equal_ok)
            return inventories.add_one(conn, provider, record)

        added = run_write(self.engine, work)
        resp.set_header("Location", util.location(
            req, f"/resource_providers/{uuid}/inventories/{record.resource_class}"))
        util.send_json(req, resp, _single_body(added), status=201,
                       last_modified=added.record.last_modified)

    def on_put(self, req, resp, uuid: str) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:resource_providers:inventories:update")
        body = util.read_json_for_provider(req, schemas.PUT_ALL, self.engine, uuid)
        generation = body["resource_provider_generation"]
        # Keys that cannot be class names were not schema-checked; they are
        # reported as unknown classes once the generation has been checked.
        unknown = sorted(rc for rc in body["inventories"] if not _RC_NAME.match(rc))
        records = {rc: build_record(rc, data) for rc, data in body["inventories"].items()
                   if _RC_NAME.match(rc)}
        equal_ok = _reserved_may_equal_total(req)

        def work(conn):
            provider, existing = inventories.for_write(conn, uuid)
            if provider is None:
                raise providers.missing_error(uuid)
            providers.check_generation(provider, generation)
            for record in records.values():
                inventories.check_capacity(uuid, record, action="update",
                                           reserved_may_equal_total=equal_ok)
            if unknown:
                raise errors.InvalidInput(
                    f"Unknown resource class in inventory for resource provider {uuid}: "
                    f"No such resource class {unknown[0]}.")
            try:
                return inventories.replace_all(conn, provider, records, generation=generation,
                                               existing=existing)
            except errors.InventoryInUse as exc:
                raise errors.InventoryInUse(f"update conflict: {exc.detail}") from None

        written = run_write(self.engine, work)
        util.send_json(req, resp, _collection_body(written),
                       last_modified=_collection_modified(written))

    def on_delete(self, req, resp, uuid: str) -> None:
        # Below 1.5 this method does not exist: 405, and no Allow header.
        util.require_version(req, (1, 5), status=405)
        util.authorize(req, "placement:resource_providers:inventories:delete")
        run_write(self.engine, lambda conn: inventories.delete_all(conn, providers.require(conn, uuid)))
        util.send_empty(resp)


class Inventory(Resource):
    METHODS = ("GET", "PUT", "DELETE")

    def on_get(self, req, resp, uuid: str, resource_class: str) -> None:
        util.require_accept_json(req)
        util.authorize(req, "placement:resource_providers:inventories:show")

        def work(conn):
            provider = _require_for_read(conn, uuid)
            record = inventories.get_one(conn, provider, resource_class)
            if record is None:
                raise errors.NotFound(f"No inventory of class {resource_class} for {uuid}")
            return inventories.InventoryAtGeneration(provider.generation, record)

        found = run_read(self.engine, work)
        util.send_json(req, resp, _single_body(found), last_modified=found.record.last_modified)

    def on_put(self, req, resp, uuid: str, resource_class: str) -> None:
        util.require_json_content(req)
        util.authorize(req, "placement:resource_providers:inventories:update")
        body = util.read_json_for_provider(req, schemas.PUT_ONE, self.engine, uuid)
        record = build_record(resource_class, body)
        equal_ok = _reserved_may_equal_total(req)

        def work(conn):
            provider = providers.require(conn, uuid)
            providers.check_generation(provider, body["resource_provider_generation"])
            inventories.check_capacity(uuid, record, action="update",
                                       reserved_may_equal_total=equal_ok)
            return inventories.update_one(conn, provider, record)

        updated = run_write(self.engine, work)
        util.send_json(req, resp, _single_body(updated), last_modified=updated.record.last_modified)

    def on_delete(self, req, resp, uuid: str, resource_class: str) -> None:
        util.authorize(req, "placement:resource_providers:inventories:delete")
        run_write(self.engine, lambda conn: inventories.delete_one(
            conn, providers.require(conn, uuid), resource_class))
        util.send_empty(resp)
