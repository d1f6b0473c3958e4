"""The HTTP plumbing below the services (billeting.common.http), on its own."""
from __future__ import annotations

import orjson

from billeting.common.http import auth
from billeting.common.http.errors import HTTPProblem


def _call(app, environ):
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def _inner(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{environ.get('HTTP_X_USER_ID')}|{environ.get('HTTP_X_PROJECT_ID')}|{environ.get('HTTP_X_ROLES')}".encode()]


def test_noauth2_answers_a_missing_token_with_the_error_document():
    status, headers, body = _call(auth.NoAuth2Middleware(_inner),
                                  {"PATH_INFO": "/hosts", auth.REQUEST_ID_KEY: "req-1"})
    assert status == "401 Unauthorized" and headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(body)
    assert orjson.loads(body) == {"errors": [{"status": 401, "title": "Unauthorized", "request_id": "req-1",
                                              "detail": "The request you have made requires authentication."}]}


def test_noauth2_takes_another_401_reply_and_leaves_the_root_open():
    def own(environ, start_response):
        start_response("401 Unauthorized", [])
        return [b"mine"]

    assert _call(auth.NoAuth2Middleware(_inner, own), {"PATH_INFO": "/x"})[2] == b"mine"
    assert _call(auth.NoAuth2Middleware(_inner, own), {"PATH_INFO": "/"})[0] == "200 OK"


def test_noauth2_token_names_user_and_project():
    app = auth.NoAuth2Middleware(_inner)
    assert _call(app, {"PATH_INFO": "/x", "HTTP_X_AUTH_TOKEN": "admin"})[2] == b"admin|admin|admin"
    assert _call(app, {"PATH_INFO": "/x", "HTTP_X_AUTH_TOKEN": "u:p"})[2] == b"u|p|"


def test_an_http_problem_is_no_service_error():
    problem = HTTPProblem(415, "use JSON", headers={"Allow": "GET"})
    assert (problem.status, problem.detail, problem.code, problem.headers) == (415, "use JSON", None, {"Allow": "GET"})
    assert type(problem).__mro__[1] is Exception
