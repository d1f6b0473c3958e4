"""``POST /reshaper`` (docs/design/placement-endpoints.md#reshaper)."""
from __future__ import annotations

from billeting.placement import errors, reshaper
from billeting.placement.api import util
from billeting.placement.api.allocations import check_uuid_keys, consumer_write
from billeting.placement.api.inventories import build_record
from billeting.placement.api.resource import Resource
from billeting.placement.api.schemas import reshaper as schemas
from billeting.placement.store.tx import RetriesExhausted, run_write


class Reshaper(Resource):
    METHODS = ("POST",)

    def on_post(self, req, resp) -> None:
        util.require_version(req, (1, 30))
        util.require_json_content(req)
        util.authorize(req, "placement:reshaper:reshape")
        mv = req.context.mv
        body = util.read_json(req, schemas.body(mv))
        check_uuid_keys(body["inventories"])
        changes = [
            reshaper.InventoryChange(
                provider_uuid=uuid, generation=entry["resource_provider_generation"],
                records={rc: build_record(rc, record) for rc, record in entry["inventories"].items()})
            for uuid, entry in body["inventories"].items()]
        writes = [consumer_write(mv, uuid, entry) for uuid, entry in body["allocations"].items()]
        try:
            run_write(self.engine, lambda conn: reshaper.reshape(conn, changes, writes),
                      retries=self.settings.allocation_conflict_retry_count)
        except RetriesExhausted as exc:
            raise errors.ConcurrentUpdate(f"update conflict: {exc.reason}") from None
        util.send_empty(resp)
