"""A small WSGI service served by ``billeting.serving``, for the serving tests.

    python -m tests.serving.toy_server --port P [--workers N] [--header-timeout S] ...

Routes: ``/echo`` answers the body it received (with its length and SHA-256
in headers), ``/wait?name=N`` blocks until the file ``N`` (in the directory
given by ``--gate-dir``) exists, ``/big?bytes=N`` answers N bytes, ``/boom``
raises, anything else says hello (and which worker answered, in ``X-Worker-Pid``).
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import time
from urllib.parse import parse_qs

from billeting.serving import ServeOptions, run


def make_app(gate_dir: str):
    def app(environ, start_response):
        path = environ["PATH_INFO"]
        if path == "/echo":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                      ("X-Body-Length", str(len(body))),
                                      ("X-Body-Sha256", hashlib.sha256(body).hexdigest())])
            return [body]
        if path == "/wait":
            name = parse_qs(environ["QUERY_STRING"])["name"][0]
            gate = os.path.join(gate_dir, name)
            open(gate + ".started", "w").close()
            while not os.path.exists(gate):
                time.sleep(0.01)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"released " + name.encode()]
        if path == "/boom":
            raise RuntimeError("boom")
        if path == "/big":
            size = int(parse_qs(environ["QUERY_STRING"])["bytes"][0])
            start_response("200 OK", [("Content-Type", "application/octet-stream")])
            return [b"b" * size]
        body = f"hello {environ['REQUEST_METHOD']} {path} {len(environ['QUERY_STRING'])}".encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Worker-Pid", str(os.getpid()))])
        return [body]

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=30.0)
    parser.add_argument("--keepalive-timeout", type=float, default=5.0)
    parser.add_argument("--send-timeout", type=float, default=30.0)
    parser.add_argument("--max-body-size", type=int, default=1 << 20)
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--gate-dir", default=".")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s")
    options = ServeOptions(host="127.0.0.1", port=args.port, workers=args.workers, threads=args.threads,
                           header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                           keepalive_timeout=args.keepalive_timeout, send_timeout=args.send_timeout,
                           max_body_size=args.max_body_size, max_connections=args.max_connections,
                           process_name="toy", on_ready=lambda url: logging.info("ready: %s", url))
    run(options, lambda: make_app(args.gate_dir))


if __name__ == "__main__":
    main()
