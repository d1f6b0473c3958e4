"""``billeting scheduler serve`` at the HTTP level: every error its HTTP
front answers itself (malformed, too large, too slow, stopping) is in the
API's error document with a ``billeting.*`` code, as every other scheduler
error is. A real server process, raw bytes."""
from __future__ import annotations

import signal
import time

import pytest

from tests.scheduler.service.procs import running_scheduler
from tests.serving.rawhttp import connect, port_of, read_answer
from tests.serving.refusals import cases, send

pytestmark = pytest.mark.slow


def _scheduler_error(answer, code: str) -> dict:
    err = answer.error  # one error, application/json, the status repeated
    assert err["code"] == f"billeting.{code}", err
    assert err["request_id"].startswith("req-") and answer.headers["x-openstack-request-id"] == err["request_id"]
    return err


def test_every_error_of_the_http_front_carries_a_code(apidb_engine, apidb_url, db_url, engine):
    with running_scheduler("--db", apidb_url, "--placement-db", db_url) as server:
        port = port_of(server)
        # Stalled mid-headers: answered 408 after the header timeout (10 s), meanwhile the rest.
        stalled = connect(port, timeout=30)
        stalled.sendall(b"GET /hosts HTTP/1.1\r\nHost: t\r\nX-Slo")
        for case in cases():
            _scheduler_error(send(port, case), case.code)
        answer = read_answer(stalled)
        stalled.close()
        assert answer.status == 408, answer
        _scheduler_error(answer, "header_timeout")
        # Stopping: a half-sent request is answered 503.
        with connect(port) as sock:
            sock.sendall(b"POST /selections HTTP/1.1\r\nHost: t\r\nContent-Length: 50\r\n\r\n{")
            time.sleep(0.2)  # the worker has it
            server.process.send_signal(signal.SIGTERM)
            answer = read_answer(sock)
        assert answer.status == 503, answer
        _scheduler_error(answer, "shutting_down")
