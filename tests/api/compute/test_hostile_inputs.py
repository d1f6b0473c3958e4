"""What a careless or hostile client sends the compute API: every answer is
a 4xx in Nova's format, never a 500, identically on every backend (a NUL
in a string is refused by PostgreSQL, an integer beyond 32 bits by every
server database's INT column)."""
from __future__ import annotations

import time
import urllib.parse

import orjson
import pytest
from tests.support.wait import wait_for

NUL = "a\u0000b"
BIG = 2**31


@pytest.fixture
def plane(plane_factory):
    p = plane_factory()
    p.flavor()
    return p


def _server(**extra):
    return {"server": {"name": "vm", "flavorRef": "1", "imageRef": "cirros", "networks": "none", **extra}}


@pytest.mark.parametrize("body", [
    _server(name=NUL),
    _server(name=" leading"),
    _server(name="trailing "),
    _server(name="tab\there"),
    _server(description=NUL),
    _server(metadata={"k": NUL}),
    _server(metadata={NUL: "v"}),
    _server(metadata={"k" * 256: "v"}),
    _server(availability_zone=NUL),
    _server(key_name=NUL),
    _server(tags=[NUL]),
    _server(min_count=BIG),
    {**_server(), "os:scheduler_hints": {"same_host": [NUL]}},
    # Server uuids, as Nova's schema says (they were taken as given and matched nothing).
    {**_server(), "os:scheduler_hints": {"different_host": "not-a-server"}},
    {**_server(), "os:scheduler_hints": {"same_host": ["6b0f7a3c-1c1c-4d4d-8e8e-000000000001", "x"]}},
    {**_server(), "os:scheduler_hints": {"group": "not-a-group"}},
    # Nova's types for user data and block devices (they were taken as anything).
    _server(user_data="not base64!"),
    _server(user_data="QUJD" * 20000),
    _server(block_device_mapping_v2=[[]]),
    _server(block_device_mapping_v2=[{"boot_index": "abc", "source_type": "volume"}]),
    _server(block_device_mapping_v2=[{"boot_index": 0, "source_type": "tape"}]),
    _server(block_device_mapping_v2=[{"boot_index": 0, "volume_size": BIG}]),
    _server(block_device_mapping_v2=[{"boot_index": 0, "delete_on_termination": "maybe"}]),
], ids=lambda b: repr(b)[:60])
def test_server_create_refuses_what_no_database_can_store(plane, body):
    resp = plane.call("POST", "/v2.1/servers", body)
    assert resp.status_code == 400, resp.text
    assert resp.json["badRequest"]["code"] == 400


@pytest.mark.parametrize("flavor", [
    {"name": NUL, "ram": 512, "vcpus": 1, "disk": 1},
    {"name": "f", "ram": BIG, "vcpus": 1, "disk": 1},
    {"name": "f", "ram": 512, "vcpus": BIG, "disk": 1},
    {"name": "f", "ram": 512, "vcpus": 1, "disk": BIG},
    {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "swap": BIG},
    {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "OS-FLV-EXT-DATA:ephemeral": BIG},
    {"name": "f", "ram": str(BIG), "vcpus": 1, "disk": 1},
    {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "id": NUL},
    {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "description": NUL},
], ids=lambda f: repr(f)[:60])
def test_flavor_create_refuses_what_no_database_can_store(plane, flavor):
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": flavor})
    assert resp.status_code == 400, resp.text
    assert resp.json["badRequest"]["code"] == 400


@pytest.mark.parametrize("factor", ["nan", "inf", "1e999", "-1", "", "abc", 1e308], ids=repr)
def test_a_flavor_rxtx_factor_is_a_finite_non_negative_number(plane, factor):
    """"inf" was kept and every flavor listing then said ``Infinity``, which
    is not JSON (strict parsers refuse the whole document); "nan" was a 409
    naming a flavor that does not exist; 1e308 overflows MariaDB's FLOAT."""
    flavor = {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "rxtx_factor": factor}
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": flavor})
    assert resp.status_code == 400, resp.text
    assert resp.json["badRequest"]["code"] == 400
    orjson.loads(plane.call("GET", "/v2.1/flavors/detail").content)  # strict JSON still


@pytest.mark.parametrize("factor", [0, "0", 2.5, "2.5", "1"], ids=repr)
def test_a_flavor_rxtx_factor_may_be_a_number_or_a_decimal_string(plane, factor):
    flavor = {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "rxtx_factor": factor}
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": flavor})
    assert resp.status_code == 200, resp.text
    assert resp.json["flavor"]["rxtx_factor"] == float(factor)


@pytest.mark.parametrize("flavor_id", ["a/b", "a?b", "a#b", "%41", "\u00e9", " x", "x ", "a\tb"], ids=repr)
def test_a_flavor_id_is_one_its_own_links_can_reach(plane, flavor_id):
    """An id with "/", "?", "#" or "%" was kept, yet its ``self`` link (and
    every GET, DELETE or flavorRef by that id) named another path: a flavor
    nobody could show, use or delete. Nova's characters only."""
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1,
                                                           "id": flavor_id}})
    assert resp.status_code == 400, resp.text
    assert [f["name"] for f in plane.call("GET", "/v2.1/flavors").json["flavors"]] == ["small"]


@pytest.mark.parametrize("flavor_id", ["m1.small", "gpu_2-x", "with space", 42], ids=repr)
def test_flavor_ids_of_nova_characters_are_reachable(plane, flavor_id):
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1,
                                                           "id": flavor_id}})
    assert resp.status_code == 200, resp.text
    href = next(link["href"] for link in resp.json["flavor"]["links"] if link["rel"] == "self")
    path = "/v2.1/flavors/" + urllib.parse.quote(str(flavor_id))
    assert href.endswith(path), href
    assert plane.call("GET", path).json["flavor"]["id"] == str(flavor_id)
    assert plane.call("DELETE", path).status_code == 202


def test_the_largest_32_bit_sizes_are_accepted(plane):
    most = 2**31 - 1
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": {"name": "max", "ram": most, "vcpus": 1, "disk": most}})
    assert resp.status_code == 200, resp.text
    assert resp.json["flavor"]["ram"] == most


@pytest.mark.parametrize("path, body", [
    ("/v2.1/flavors/1/os-extra_specs", {"extra_specs": {"hw:cpu_policy": NUL}}),
    ("/v2.1/os-server-groups", {"server_group": {"name": NUL, "policy": "affinity"}}),
])
def test_other_bodies_refuse_nul(plane, path, body):
    resp = plane.call("POST", path, body)
    assert resp.status_code == 400, resp.text


@pytest.mark.parametrize("query", [
    "name=a&name=b",
    "name=%00",
    "changes-since=not-a-date",
    "marker=%00",
    "status=%00",
    "limit=99999999999999999999",
], ids=str)
def test_server_list_queries_are_4xx_at_worst(plane, query):
    plane.boot()
    resp = plane.call("GET", f"/v2.1/servers/detail?{query}")
    assert resp.status_code in (200, 400), resp.text
    if query.startswith("changes-since"):
        assert resp.status_code == 400


def test_a_nul_in_a_path_is_a_404(plane):
    for path in ("/v2.1/servers/%00", "/v2.1/flavors/%00", "/v2.1/os-server-groups/%00",
                 "/v2.1/os-hypervisors/%00", "/v2.1/servers/%00/os-instance-actions"):
        resp = plane.call("GET", path)
        assert resp.status_code in (400, 404), (path, resp.text)


@pytest.mark.parametrize("query", ["all_tenants=0&project_id=%00", "host=%00", "%00=1"], ids=str)
def test_a_nul_in_a_query_is_a_400(plane, query):
    resp = plane.call("GET", f"/v2.1/servers/detail?{query}")
    assert resp.status_code == 400, resp.text
    assert "NUL characters are not allowed" in resp.json["badRequest"]["message"]


def test_a_repeated_query_parameter_counts_once(plane):
    plane.boot(name="alpha")
    plane.boot(name="beta")
    resp = plane.call("GET", "/v2.1/servers/detail?name=zzz&name=alpha&limit=9&limit=1")
    assert resp.status_code == 200, resp.text
    assert [s["name"] for s in resp.json["servers"]] == ["alpha"]


def test_a_catastrophic_name_pattern_is_refused_in_time(plane):
    """``(a|aa)+$`` against forty ``a`` and a ``!`` backtracks for hours in
    Python's ``re``; any tenant can name a server so and hold a worker."""
    plane.boot(name="a" * 40 + "!")
    plane.boot(name="web-1")
    started = time.monotonic()
    resp = plane.call("GET", "/v2.1/servers/detail?name=(a%7Caa)%2B%24")
    assert resp.status_code == 400, resp.text
    assert "took too long" in resp.json["badRequest"]["message"]
    assert time.monotonic() - started < 30  # the budget is 0.5 s; generous for a busy CI machine
    resp = plane.call("GET", "/v2.1/servers?name=%5Eweb-%5Cd%24")  # ^web-\d$
    assert [s["name"] for s in resp.json["servers"]] == ["web-1"]
    resp = plane.call("GET", "/v2.1/servers?name=(unclosed")
    assert resp.status_code == 400
    assert "Invalid regular expression" in resp.json["badRequest"]["message"]


def test_changes_since_keeps_what_changed_after_it(plane):
    plane.boot()
    assert len(plane.call("GET", "/v2.1/servers/detail?changes-since=2000-01-01T00:00:00Z").json["servers"]) == 1
    assert plane.call("GET", "/v2.1/servers/detail?changes-since=2999-01-01T00:00:00Z").json["servers"] == []
    assert len(plane.call("GET", "/v2.1/servers?changes-before=2999-01-01T00:00:00").json["servers"]) == 1
    assert plane.call("GET", "/v2.1/servers?changes-before=2000-01-01T00:00:00").json["servers"] == []
    # A window that ends before it starts is a 400 (2.66, as in Nova); before 2.66 changes-before is ignored.
    window = "/v2.1/servers?changes-since=2000-01-02T00:00:00Z&changes-before=2000-01-01T00:00:00Z"
    resp = plane.call("GET", window)
    assert resp.status_code == 400 and "changes-since must be less than" in resp.text, resp.text
    old = plane.call("GET", window.replace("2000-01-02", "1999-01-02"), headers={"OpenStack-API-Version": "compute 2.65"})
    assert len(old.json["servers"]) == 1, old.text


def test_an_unknown_availability_zone_is_refused_at_the_api(plane):
    resp = plane.call("POST", "/v2.1/servers", _server(availability_zone="atlantis"))
    assert resp.status_code == 400, resp.text
    assert resp.json["badRequest"]["message"] == "The requested availability zone is not available"
    # the default zone, which every host outside a named zone is in, is always known
    assert plane.call("POST", "/v2.1/servers", _server(availability_zone="nova")).status_code == 202


@pytest.mark.parametrize("counts", [{"min_count": "0"}, {"min_count": "00", "max_count": "0"}, {"max_count": 0}],
                         ids=str)
def test_counts_of_zero_given_as_strings_are_400(plane, counts):
    # (found by the fuzz test: "0" matched the digits pattern, and "minimum" does not apply to strings)
    resp = plane.call("POST", "/v2.1/servers", _server(**counts))
    assert resp.status_code == 400, resp.text


def test_counts_with_leading_zeros_are_numbers(plane):
    assert plane.call("POST", "/v2.1/servers", _server(min_count="01", max_count="0002")).status_code == 202


def test_free_form_hints_of_any_json_type_are_kept(plane):
    # (found by the fuzz test: a hint whose value was not a string or a list was a 500)
    body = {**_server(), "OS-SCH-HNT:scheduler_hints": {"flag": True, "n": 3, "deep": {"a": [1]}, "l": [1, "x"]}}
    resp = plane.call("POST", "/v2.1/servers", body)
    assert resp.status_code == 202, resp.text


def test_names_differing_by_edge_spaces_are_refused_alike_on_every_backend(plane):
    # MariaDB compares "k" and "k " as equal: a 500 there (unique key), two keys elsewhere
    resp = plane.call("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": {"hw:k": "1", "hw:k ": "2"}})
    assert resp.status_code == 400, resp.text
    # and "1 " finds flavor "1" there, nothing elsewhere: a 404 everywhere
    for path in ("/v2.1/flavors/1%20", "/v2.1/flavors/%201", "/v2.1/flavors/1%20/os-extra_specs"):
        assert plane.call("GET", path).status_code == 404, path
    server = plane.boot()
    assert plane.call("GET", f"/v2.1/servers/{server}%20").status_code == 404
    assert plane.call("GET", f"/v2.1/servers/{server}").status_code == 200


@pytest.mark.parametrize("token", ["alice :p1", "alice: p1", ":", ":p1", "u" * 256 + ":p1", "alice:" + "p" * 256])
def test_an_identity_with_edge_spaces_is_not_one(plane, token):
    # no identity has edge spaces (and MariaDB would take user "alice " for "alice"),
    # none is empty, none is longer than the columns that keep it
    resp = plane.call("GET", "/v2.1/servers/detail", headers={"X-Auth-Token": token})
    assert resp.status_code == 401, resp.text


def test_server_uuids_in_hints_count_in_any_form_nova_takes(plane_factory):
    """A client may write a uuid upper case or without dashes; the hint must
    still name that server (it was matched as written, so it named none)."""

    p = plane_factory(computes=2)
    p.flavor()
    first = p.boot(name="first")
    wait_for(lambda: p.status(first) == "ACTIVE", what="ACTIVE")
    host_of = lambda uuid: p.call("GET", f"/v2.1/servers/{uuid}").json["server"]["OS-EXT-SRV-ATTR:host"]  # noqa: E731
    for written in (first.upper(), first.replace("-", ""), "{" + first + "}"):
        resp = p.call("POST", "/v2.1/servers", {**_server(name="apart"),
                                                "os:scheduler_hints": {"different_host": [written]}})
        assert resp.status_code == 202, resp.text
        uuid = resp.json["server"]["id"]
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
        assert host_of(uuid) != host_of(first), written
        resp = p.call("POST", "/v2.1/servers", {**_server(name="together"),
                                                "os:scheduler_hints": {"same_host": written}})
        assert resp.status_code == 202, resp.text
        uuid = resp.json["server"]["id"]
        wait_for(lambda: p.status(uuid) == "ACTIVE", what="ACTIVE")
        assert host_of(uuid) == host_of(first), written


def test_a_build_the_bus_refuses_is_a_503_that_leaves_nothing(plane_factory, monkeypatch):
    """RabbitMQ down when a server is requested: the API answers 503 and keeps
    nothing, rather than a server in BUILD that no super conductor will ever get."""
    from sqlalchemy import func, select

    from billeting.apidb import instance_actions
    from billeting.apidb import tables as at
    from billeting.messaging import BusUnavailable

    p = plane_factory(computes=1)
    p.flavor()

    def refused(plan):
        raise BusUnavailable("cannot publish on amqp://…: [Errno 111] Connection refused")

    monkeypatch.setattr(p.plane.deps, "cast_build", refused)
    resp = p.call("POST", "/v2.1/servers", _server(min_count=2))
    assert resp.status_code == 503, resp.text
    assert "message bus is unavailable" in resp.json["serviceUnavailable"]["message"]
    assert p.call("GET", "/v2.1/servers").json["servers"] == []
    with p.api_engine.connect() as conn:
        for table in (at.build_requests, at.instance_mappings, at.request_specs, at.instance_actions):
            assert conn.execute(select(func.count()).select_from(table)).scalar() == 0, table.name
    monkeypatch.undo()
    uuid = p.boot()  # the bus is back: the next request is built as usual
    assert instance_actions.listing(p.api_engine, uuid)[0].action == "create"


def test_a_value_the_database_cannot_keep_is_a_400(plane, monkeypatch):
    """What the schemas miss and PostgreSQL or MariaDB refuse as too long
    (a DataError) is the request's fault: a 400, never a 500."""
    from sqlalchemy.exc import DataError

    from billeting.apidb import flavors

    def too_long(*_a, **_kw):
        raise DataError("INSERT INTO flavors ...", {}, Exception("value too long for type character varying(255)"))

    monkeypatch.setattr(flavors, "create", too_long)
    resp = plane.call("POST", "/v2.1/flavors", {"flavor": {"name": "f", "ram": 1, "vcpus": 1, "disk": 0}})
    assert resp.status_code == 400 and "too long" in resp.text, resp.text


def test_user_data_and_block_devices_as_clients_send_them_are_accepted(plane):
    """Base64 user data (with line breaks, as cloud-init tools wrap it) and the
    block device mappings openstacksdk and the CLI send for a volume boot."""
    import base64

    wrapped = base64.encodebytes(b"#cloud-config\n" * 20).decode()
    resp = plane.call("POST", "/v2.1/servers", _server(user_data=wrapped))
    assert resp.status_code == 202, resp.text
    bdm = [{"boot_index": "0", "uuid": "6b0f7a3c-1c1c-4d4d-8e8e-000000000001", "source_type": "volume",
            "destination_type": "volume", "volume_size": "10", "delete_on_termination": "true",
            "device_name": "vda"},
           {"boot_index": -1, "source_type": "blank", "destination_type": "local", "volume_size": 1,
            "guest_format": "swap"}]
    body = _server(block_device_mapping_v2=bdm)
    del body["server"]["imageRef"]
    resp = plane.call("POST", "/v2.1/servers", body)
    assert resp.status_code == 202, resp.text


def _nested(depth: int, inner: bytes) -> bytes:
    return b"[" * depth + inner + b"]" * depth


@pytest.mark.parametrize("depth", [255, 300, 1024, 10000])
@pytest.mark.parametrize("inner", [b"1", b'"a\\u0000b"'], ids=["int", "nul"])
def test_a_deeply_nested_body_is_a_400_in_novas_format(plane, depth, inner):
    """Such a body was a 500 (the validator or the message quoting it ran
    out of recursion) up to orjson's own limit of 1024."""
    for path, template in [
        ("/v2.1/servers", b'{"server": {"name": "vm", "flavorRef": "1", "imageRef": "cirros", "metadata": %s}}'),
        ("/v2.1/flavors", b'{"flavor": {"name": "f", "ram": %s, "vcpus": 1, "disk": 1}}'),
        ("/v2.1/os-aggregates", b"%s"),
    ]:
        resp = plane.call("POST", path, raw=template % _nested(depth, inner))
        assert resp.status_code == 400, (path, resp.text[:300])
        assert resp.json["badRequest"]["code"] == 400
        if depth < 1000:  # deeper, orjson refuses it while parsing
            assert "levels deep" in resp.json["badRequest"]["message"], (path, resp.text[:300])


def test_a_legitimately_nested_boot_still_works(plane):
    plane.boot(block_device_mapping_v2=[{"boot_index": 0, "source_type": "image", "uuid": "cirros",
                                         "destination_type": "local"}], metadata={"k": "v"})
