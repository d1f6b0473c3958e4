"""Run as ``python -m tests.scheduler.service.first_requests DB_URL WORKERS``: fork
WORKERS scheduler workers the way ``billeting scheduler serve`` does (each
child calls ``load_app`` after the fork); in each, 8 threads send every body
shape the API converts (typed and Nova-form selections, a host report)
through the WSGI app, all 8 at once for each shape (a barrier per shape).
Prints ``crashed=N failed=M``: children killed by a signal, and children
that got a 5xx. (Issue 28: the first conversion of a msgspec type, done by
two threads at once, crashed the worker with SIGSEGV.)"""
from __future__ import annotations

import os
import sys
import threading
import uuid

import falcon.testing
import orjson

# What load_app imports, imported once here to keep each worker short (a
# module-level msgspec type built at import is then built before the fork, as
# it would be in the worker's load_app: before any thread serves).
import billeting.apidb.migrate  # noqa: F401
import billeting.placement_client.inprocess  # noqa: F401
import billeting.scheduler.api.app  # noqa: F401
import billeting.scheduler.service.runtime  # noqa: F401
from billeting.scheduler.serve import load_app
from billeting.scheduler.service.config import ServiceConfig

THREADS = 8


def bodies() -> list[tuple[str, str, dict]]:
    def inst() -> str:
        return str(uuid.uuid4())

    typed = {"project_id": "p1", "user_id": "u1", "groups": [{"resources": {"VCPU": 1}}],
             "destination": {"host": "h1"}, "near": {"level": "rack"}, "server_group": {
                 "uuid": inst(), "policy": "affinity"}}
    nova = {"project_id": "p1", "user_id": "u1", "flavor": {"vcpus": 1, "memory_mb": 64},
            "image": {"id": "i", "properties": {"hw_architecture": "x86_64"}}, "destination": {"host": "h1"}}
    report = {"service_host": "h1", "enabled": True, "num_instances": 1, "cpu_info": {"arch": "x86_64"}}
    return [("POST", "/selections", {**typed, "instance_uuids": [inst()]}),
            ("POST", "/selections", {**nova, "instance_uuids": [inst()]}),
            ("PUT", f"/hosts/h-{inst()}", report)]


def call(app, method: str, path: str, body: dict) -> int:
    status: list[int] = []

    def start_response(line, headers, exc_info=None):
        status.append(int(line[:3]))
        return lambda data: None

    environ = falcon.testing.create_environ(path=path, method=method, body=orjson.dumps(body), headers={
        "X-Auth-Token": "admin", "Content-Type": "application/json"})
    b"".join(app(environ, start_response))
    return status[0]


def worker(url: str) -> int:
    sys.setswitchinterval(1e-4)  # switch threads often, as a loaded host does: the race shows sooner
    app = load_app(ServiceConfig(db=url, placement_db=url))
    shapes = bodies()
    barrier = threading.Barrier(THREADS)
    statuses: list[int] = []

    def one() -> None:
        for method, path, body in shapes:  # each shape's first conversion, by all threads at once
            barrier.wait()
            statuses.append(call(app, method, path, body))

    threads = [threading.Thread(target=one) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0 if len(statuses) == THREADS * len(shapes) and max(statuses) < 500 else 3


def main(url: str, workers: int) -> None:
    crashed = failed = 0
    running: set[int] = set()
    for n in range(workers):
        if len(running) >= 2:
            pid, status = os.wait()
            running.discard(pid)
            crashed += os.WIFSIGNALED(status)
            failed += os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0
        pid = os.fork()
        if pid == 0:
            code = 4
            try:
                code = worker(url)
            finally:
                os._exit(code)
        running.add(pid)
    for pid in running:
        _, status = os.waitpid(pid, 0)
        crashed += os.WIFSIGNALED(status)
        failed += os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0
    print(f"crashed={crashed} failed={failed}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
