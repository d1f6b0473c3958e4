"""What every scheduler API resource uses: the service, policy checks,
validated bodies and msgspec-encoded answers."""
from __future__ import annotations

from dataclasses import dataclass

import falcon
import msgspec

from billeting.common.http import util
from billeting.common.http.policy import Authorizer
from billeting.common.http.util import authorize, ctx, send_empty  # noqa: F401 - the resources' helpers

_encode = msgspec.json.Encoder().encode


@dataclass
class Deps:
    """Built once per process."""

    service: object  # billeting.scheduler.service.runtime.SchedulerService
    authorizer: Authorizer


class Resource:
    """One route; ``METHODS`` lists what it answers (anything else is a 405)."""

    METHODS: tuple[str, ...] = ()

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = deps.service


def body(req: falcon.Request, schema: dict) -> dict:
    """The JSON body, checked against ``schema`` (415 when not JSON, 400 when invalid)."""
    util.require_json_content(req)
    data = util.read_json(req)
    if not isinstance(data, dict):
        util.validate(data, {"type": "object"}, brief=True)
    util.validate(data, schema, brief=True)
    return data


def send(resp: falcon.Response, value: object, *, status: int = 200) -> None:
    resp.status = status
    resp.content_type = util.JSON
    resp.data = _encode(value)
