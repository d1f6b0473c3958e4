"""Every limit of a writable field is the compute API's, not the database's:
one over it is a 400 in Nova's format on every backend (SQLite kept what
PostgreSQL refused, MariaDB counts a TEXT column in bytes), exactly at it
is accepted. Numbers whose cost or meaning has a ceiling (vCPUs, amounts
Placement can hold) are refused beyond it with a 400 naming it."""
from __future__ import annotations

import orjson
import pytest

from billeting.api.compute.servers import MAX_HINTS_JSON
from billeting.apidb.flavors import MAX_SPECS_JSON
from billeting.scheduler.bounds import MAX_AMOUNT, MAX_VCPUS


@pytest.fixture
def plane(plane_factory):
    p = plane_factory(computes=1)
    p.flavor()
    return p


def _flavor(**extra):
    return ("POST", "/v2.1/flavors", {"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, **extra}})


def _server(**extra):
    return ("POST", "/v2.1/servers",
            {"server": {"name": "vm", "flavorRef": "1", "imageRef": "cirros", "networks": "none", **extra}})


def _text(length: int) -> str:
    return "x" * length


def _utf8(size: int) -> str:
    """Text of ``size`` bytes as UTF-8, mostly two-byte characters."""
    return "\u00e9" * (size // 2) + "x" * (size % 2)


# (what, the request for a value, the value of a given size, the limit)
FIELDS = [
    ("flavor name", lambda v: _flavor(name=v), _text, 255),
    ("flavor id", lambda v: _flavor(id=v), _text, 255),
    ("flavor description (bytes)", lambda v: _flavor(description=v), _utf8, 65535),
    ("extra spec value", lambda v: ("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": {"hw:x": v}}),
     _text, 255),
    ("extra spec value (PUT)", lambda v: ("PUT", "/v2.1/flavors/1/os-extra_specs/hw:x", {"hw:x": v}), _text, 255),
    ("extra spec key", lambda v: ("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": {v: "1"}}),
     _text, 255),
    ("server name", lambda v: _server(name=v), _text, 255),
    ("server name, 10 servers", lambda v: _server(name=v, max_count=10), _text, 255 - len("-10")),
    ("server metadata key", lambda v: _server(metadata={v: "v"}), _text, 255),
    ("server metadata value", lambda v: _server(metadata={"k": v}), _text, 255),
    ("server description", lambda v: _server(description=v), _text, 255),
    ("server tag", lambda v: _server(tags=[v]), _text, 60),
    ("server group name", lambda v: ("POST", "/v2.1/os-server-groups",
                                     {"server_group": {"name": v, "policy": "affinity"}}), _text, 255),
    ("aggregate name", lambda v: ("POST", "/v2.1/os-aggregates", {"aggregate": {"name": v}}), _text, 255),
    ("aggregate zone", lambda v: ("POST", "/v2.1/os-aggregates",
                                  {"aggregate": {"name": "a", "availability_zone": v}}), _text, 255),
]


@pytest.mark.parametrize("request_for, value, limit", [f[1:] for f in FIELDS], ids=[f[0] for f in FIELDS])
def test_one_over_a_field_limit_is_a_400_and_the_limit_is_accepted(plane, request_for, value, limit):
    method, path, body = request_for(value(limit + 1))
    resp = plane.call(method, path, body)
    assert resp.status_code == 400, resp.text
    assert resp.json["badRequest"]["code"] == 400
    method, path, body = request_for(value(limit))
    resp = plane.call(method, path, body)
    assert resp.status_code in (200, 202), resp.text


def test_a_limit_is_named_in_the_message(plane):
    resp = plane.call("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": {"hw:x": "v" * 300}})
    assert resp.status_code == 400
    assert "longer than 255 characters" in resp.json["badRequest"]["message"], resp.text
    method, path, body = _flavor(description=_utf8(65536))
    resp = plane.call(method, path, body)
    assert "longer than 65535 bytes" in resp.json["badRequest"]["message"], resp.text


# (what, the request for a number, the largest accepted, a word of the message)
NUMBERS = [
    ("vcpus", lambda n: _flavor(vcpus=n), MAX_VCPUS, f"at most {MAX_VCPUS} vCPUs"),
    ("vcpus as text", lambda n: _flavor(vcpus=str(n)), MAX_VCPUS, f"at most {MAX_VCPUS} vCPUs"),
    ("ram", lambda n: _flavor(ram=n), MAX_AMOUNT, str(MAX_AMOUNT)),
    ("disk + ephemeral", lambda n: _flavor(disk=MAX_AMOUNT - 10, **{"OS-FLV-EXT-DATA:ephemeral": n}), 10,
     str(MAX_AMOUNT)),
    ("disk + swap", lambda n: _flavor(disk=MAX_AMOUNT - 10, swap=n * 1024), 10, str(MAX_AMOUNT)),
    ("extra spec amount", lambda n: ("POST", "/v2.1/flavors/1/os-extra_specs",
                                     {"extra_specs": {"resources:VCPU": str(n)}}), MAX_AMOUNT, str(MAX_AMOUNT)),
    ("extra spec amount (PUT)", lambda n: ("PUT", "/v2.1/flavors/1/os-extra_specs/resources1:CUSTOM_X",
                                           {"resources1:CUSTOM_X": n}), MAX_AMOUNT, str(MAX_AMOUNT)),
    ("max_count", lambda n: _server(max_count=n, name="many"), 1000, "at most 1000"),
]


@pytest.mark.parametrize("request_for, most, says", [n[1:] for n in NUMBERS], ids=[n[0] for n in NUMBERS])
def test_a_number_beyond_its_bound_is_a_400_naming_it(plane, request_for, most, says):
    """10**6 vCPUs with ``hw:cpu_policy=mixed`` took the scheduler a second per
    request (its masks are read per vCPU); an extra spec's amount beyond what
    Placement holds was stored, and every server of the flavor failed later."""
    method, path, body = request_for(most + 1)
    resp = plane.call(method, path, body)
    assert resp.status_code == 400, resp.text
    assert says in resp.json["badRequest"]["message"], resp.text
    if "max_count" in body.get("server", {}):
        return  # (a thousand builds: the bound is the old one, checked above)
    method, path, body = request_for(most)
    resp = plane.call(method, path, body)
    assert resp.status_code == 200, resp.text



def _chars(size: int) -> str:
    """At most 255 characters that take ``size`` bytes as UTF-8 (two-byte ones first)."""
    wide = max(0, size - 255)
    return "\u00e9" * wide + "x" * (size - 2 * wide)


def _specs_of(size: int) -> dict[str, str]:
    """Extra specs of ``size`` bytes as JSON, of two-byte characters mostly."""
    specs: dict[str, str] = {}
    while len(orjson.dumps(specs)) + 524 < size:
        specs[f"hw:k{len(specs):03d}"] = "\u00e9" * 255
    last = f"hw:k{len(specs):03d}"
    specs[last] = ""
    specs[last] = _chars(size - len(orjson.dumps(specs)))
    assert len(orjson.dumps(specs)) == size
    return specs


def test_what_a_server_carries_fits_a_text_column_on_every_backend(plane):
    """A server keeps its flavor (extra specs and all) and its hints as JSON
    in TEXT columns, 64 KiB on MariaDB: 200 extra specs of 255 "é" were
    accepted, and then every boot of the flavor was a 400 there only, as
    were 70 KiB of hints. Each has its own share now, on every backend."""
    resp = plane.call("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": _specs_of(MAX_SPECS_JSON + 1)})
    assert resp.status_code == 400, resp.text
    assert str(MAX_SPECS_JSON) in resp.json["badRequest"]["message"]
    assert plane.call("GET", "/v2.1/flavors/1/os-extra_specs").json["extra_specs"] == {}  # nothing kept
    specs = _specs_of(MAX_SPECS_JSON)
    assert plane.call("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": specs}).status_code == 200
    resp = plane.call("PUT", "/v2.1/flavors/1/os-extra_specs/hw:one_more", {"hw:one_more": "1"})
    assert resp.status_code == 400, resp.text

    method, path, body = _server()
    hints = {"h": ""}
    hints["h"] = "\u00e9" * ((MAX_HINTS_JSON - len(orjson.dumps(hints))) // 2)
    over = {**body, "os:scheduler_hints": {"h": hints["h"] + "xx"}}
    resp = plane.call(method, path, over)
    assert resp.status_code == 400, resp.text
    assert str(MAX_HINTS_JSON) in resp.json["badRequest"]["message"]
    assert len(orjson.dumps(hints)) == MAX_HINTS_JSON
    resp = plane.call(method, path, {**body, "os:scheduler_hints": hints})
    assert resp.status_code == 202, resp.text
