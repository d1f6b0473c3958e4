"""Serving WSGI applications over HTTP/1.1, for every Billeting service.

    from billeting.serving import ServeOptions, run
    run(ServeOptions(host="127.0.0.1", port=8778, workers=2), load_app)

Why this shape: a supervising master (gunicorn's arbiter) forks workers and
replaces dead ones; each worker is an asyncio event loop that reads whole
requests (headers and body, chunked decoded, under deadlines and size
limits) and passes only complete ones to a pool of application threads.
gunicorn's thread worker alone reads in the application threads, so a few
clients that stall mid-request occupy all of them. Off-the-shelf
alternatives were weighed: uvicorn has no deadline for receiving a request
(its keep-alive timer restarts on every byte) and answers protocol errors in
plain text; WSGI-over-ASGI bridges such as a2wsgi read the body lazily from
the application thread; gevent would need monkey-patching under
SQLAlchemy and the database drivers. httptools (llhttp) parses HTTP/1.1 here.
"""
from billeting.serving.master import run
from billeting.serving.options import ErrorBody, ErrorRenderer, ServeOptions, bind_address, json_errors
from billeting.serving.wsgi import WSGIApp

__all__ = ["ErrorBody", "ErrorRenderer", "ServeOptions", "WSGIApp", "bind_address", "json_errors", "run"]
