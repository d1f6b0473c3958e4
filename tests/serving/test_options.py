"""In-process parts of the serving layer: the serve settings from every
source, ServeOptions checks, the WSGI environ built from a complete request,
the Placement error renderer, and the connection board."""
from __future__ import annotations

import os

import orjson
import pytest

from billeting.cli import build_parser
from billeting.commands.common import settings_from_args
from billeting.config import SettingsError, load_settings
from billeting.placement.serve import render_server_error, serve_options
from billeting.serving import ServeOptions, json_errors
from billeting.serving.balance import ConnectionBoard
from billeting.serving.wsgi import CompleteRequest, build_environ, call_app


def test_serve_settings_come_from_flags_environment_and_file(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text("[api]\nheader_timeout = 4.5\nbody_timeout = 12\nmax_body_size = 2048\n"
                    "keepalive_timeout = 2\ngraceful_timeout = 7\n")
    settings = load_settings({"config_file": str(conf)}, environ={"BILLETING_BODY_TIMEOUT": "20"})
    assert (settings.header_timeout, settings.body_timeout, settings.max_body_size) == (4.5, 20.0, 2048)
    assert (settings.keepalive_timeout, settings.graceful_timeout) == (2.0, 7.0)
    args = build_parser().parse_args(["serve", "--header-timeout", "1.5", "--max-body-size", "100",
                                      "--keepalive-timeout", "3", "--graceful-timeout", "0.5",
                                      "--body-timeout", "9"])
    settings = settings_from_args(args, environ={})
    options = serve_options(settings)
    assert (options.header_timeout, options.body_timeout, options.keepalive_timeout,
            options.graceful_timeout, options.max_body_size) == (1.5, 9.0, 3.0, 0.5, 100)


@pytest.mark.parametrize("name,value,message", [
    ("HEADER_TIMEOUT", "0", "header_timeout must be a positive number of seconds"),
    ("BODY_TIMEOUT", "-1", "body_timeout must be a positive number of seconds"),
    ("GRACEFUL_TIMEOUT", "inf", "graceful_timeout must be a positive number of seconds"),
    ("KEEPALIVE_TIMEOUT", "soon", "invalid value for keepalive_timeout"),
    ("MAX_BODY_SIZE", "0", "max_body_size must be at least 1 byte"),
])
def test_bad_serve_settings_are_refused_by_name(name, value, message):
    with pytest.raises(SettingsError, match=message):
        load_settings({}, environ={f"BILLETING_{name}": value})


def test_serve_options_check_their_values():
    with pytest.raises(ValueError, match="threads must be at least 1"):
        ServeOptions(host="127.0.0.1", port=1, threads=0)
    with pytest.raises(ValueError, match="header_timeout must be positive"):
        ServeOptions(host="127.0.0.1", port=1, header_timeout=0)
    assert ServeOptions(host="::1", port=8778).url == "http://[::1]:8778/"


def _request(target: bytes, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> CompleteRequest:
    return CompleteRequest(method="POST", target=target, http_version="1.1", headers=tuple(headers),
                           body=body, client=("127.0.0.1", 5000), server=("127.0.0.1", 8778))


def test_the_environ_of_a_complete_request():
    environ = build_environ(_request(
        b"/a%20b/%E2%9C%93?x=1&y=%20",
        [(b"host", b"h"), (b"content-type", b"application/json"), (b"transfer-encoding", b"chunked"),
         (b"x-auth-token", b"admin"), (b"x-user_id", b"spoof"), (b"accept", b"a"), (b"accept", b"b")],
        body=b'{"a": 1}'), multiprocess=True)
    assert environ["PATH_INFO"] == "/a b/\xe2\x9c\x93"  # PEP 3333: bytes as latin-1
    assert environ["QUERY_STRING"] == "x=1&y=%20"
    assert environ["CONTENT_TYPE"] == "application/json"
    assert environ["CONTENT_LENGTH"] == "8"  # the decoded chunked body's length
    assert "HTTP_TRANSFER_ENCODING" not in environ
    assert environ["HTTP_X_AUTH_TOKEN"] == "admin"
    assert "HTTP_X_USER_ID" not in environ  # underscores could forge dash names
    assert environ["HTTP_ACCEPT"] == "a,b"
    assert environ["wsgi.input"].read() == b'{"a": 1}'
    assert environ["wsgi.multiprocess"] is True and environ["REMOTE_ADDR"] == "127.0.0.1"
    absolute = build_environ(_request(b"http://h:1/p/q?z=2", []), multiprocess=False)
    assert (absolute["PATH_INFO"], absolute["QUERY_STRING"]) == ("/p/q", "z=2")
    assert "CONTENT_LENGTH" not in absolute


def test_an_app_that_fails_gives_the_services_500():
    def broken(environ, start_response):
        raise RuntimeError("no")

    def no_start(environ, start_response):
        return [b"body without a status"]

    for app in (broken, no_start):
        response = call_app(app, _request(b"/", []), json_errors, multiprocess=False)
        assert response.status == 500
        [err] = orjson.loads(b"".join(response.body))["errors"]
        assert err["title"] == "Internal Server Error" and err["code"] == "internal_error"


def test_placement_renders_server_errors_in_its_format():
    page = render_server_error(408, "header_timeout", "slow")
    doc = orjson.loads(page.body)
    [err] = doc["errors"]
    assert page.content_type == "application/json"
    assert err == {"status": 408, "title": "Request Timeout", "detail": "slow", "request_id": err["request_id"]}
    assert dict(page.headers) == {"x-openstack-request-id": err["request_id"]}
    assert err["request_id"].startswith("req-")


def test_the_scheduler_renders_server_errors_in_placements_format_with_its_code():
    from billeting.scheduler.serve import render_server_error as scheduler_server_error

    page = scheduler_server_error(413, "request_too_large", "big")
    [err] = orjson.loads(page.body)["errors"]
    assert err == {"status": 413, "title": "Request Entity Too Large", "detail": "big",
                   "code": "billeting.request_too_large", "request_id": err["request_id"]}
    assert dict(page.headers) == {"x-openstack-request-id": err["request_id"]}


def test_the_board_points_at_the_worker_with_fewer_connections():
    board = ConnectionBoard(4)
    a, b = board.claim(), board.claim()
    assert (a, b) == (0, 1)
    board.publish(a, os.getpid(), 3)
    board.publish(b, os.getpid() + 1, 1)
    assert board.someone_has_fewer(a, 3) and not board.someone_has_fewer(b, 1)
    board.publish(b, os.getpid() + 1, -1)  # not accepting: nothing is left to it
    assert not board.someone_has_fewer(a, 3)
    board.release(b)
    assert board.claim() == b


def test_the_compute_api_renders_server_errors_in_novas_format_with_a_request_id():
    from billeting.api.compute.errors import render_server_error as nova_server_error

    page = nova_server_error(408, "header_timeout", "slow")
    doc = orjson.loads(page.body)
    assert page.content_type == "application/json"
    [(_kind, fault)] = doc.items()
    assert fault == {"code": 408, "message": "slow"}
    headers = dict(page.headers)
    assert headers["x-openstack-request-id"].startswith("req-")
    assert headers["x-compute-request-id"] == headers["x-openstack-request-id"]


def test_the_loop_is_uvloops_where_installed_else_asyncios(monkeypatch):
    import asyncio
    import sys

    from billeting.serving import loop_parts

    uvloop = pytest.importorskip("uvloop")
    loop = loop_parts.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if it were not installed
    loop = loop_parts.new_event_loop()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop) and not isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
