"""A small Placement HTTP client for the operator tools.

It speaks to any Placement service (Billeting or upstream) at a fixed
microversion, one keep-alive session per thread, and turns every failure into
a ``ToolError`` whose message names the request and the service's own error
detail, so the command can print it as one line.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

import orjson
import requests

from billeting.placement.tools.errors import ToolError

T = TypeVar("T")
R = TypeVar("R")

TIMEOUT_S = 60
# The tools need consumer types (1.38); 1.39 changed nothing they use.
NEEDED = (1, 38)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: object  # parsed JSON, or None for an empty body


def _version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def path(*parts: str) -> str:
    """A URL path from segments, each quoted (names may hold any character)."""
    return "/" + "/".join(quote(part, safe="") for part in parts)


class PlacementHttp:
    def __init__(self, url: str, token: str, *, timeout: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.version = NEEDED
        self._local = threading.local()

    # --- plumbing -------------------------------------------------------------------

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.headers.update({"X-Auth-Token": self.token, "Accept": "application/json"})
        return session

    def request(self, method: str, where: str, body: object = None, *, version: tuple[int, int] | None = None,
                ok: Iterable[int] = (200, 201, 204)) -> Answer:
        headers = {"OpenStack-API-Version": f"placement {_version_text(version or self.version)}"}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        try:
            resp = self._session().request(method, self.url + where, data=data, headers=headers,
                                           timeout=self.timeout)
        except requests.RequestException as exc:
            raise ToolError(f"{method} {self.url}{where}: {_reason(exc)}") from None
        parsed = None
        if resp.content:
            try:
                parsed = orjson.loads(resp.content)
            except orjson.JSONDecodeError:
                parsed = None
        if resp.status_code not in ok:
            raise ToolError(f"{method} {where}: {resp.status_code} {_detail(parsed, resp)}")
        return Answer(resp.status_code, parsed)

    def get(self, where: str, **kw) -> dict:
        return self.request("GET", where, **kw).body  # type: ignore[return-value]

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()

    # --- version ----------------------------------------------------------------------

    def negotiate(self) -> tuple[int, int]:
        """Use 1.39 where the service has it, else 1.38; refuse anything older."""
        root = self.request("GET", "/", version=(1, 0)).body
        try:
            text = root["versions"][0]["max_version"]  # type: ignore[index]
            major, minor = (int(part) for part in text.split("."))
        except (TypeError, KeyError, IndexError, ValueError):
            raise ToolError(f"{self.url} does not look like a Placement service (GET / gave no version document)") \
                from None
        if (major, minor) < NEEDED:
            raise ToolError(f"{self.url} supports Placement microversions up to {major}.{minor}; "
                            f"these tools need {_version_text(NEEDED)} or later")
        self.version = min((major, minor), (1, 39))
        return self.version


_QUOTES = " >)\"'"  # what urllib3's message wraps the OS error in


def _reason(exc: requests.RequestException) -> str:
    text = str(exc.args[0] if exc.args else exc)
    if isinstance(exc, requests.ConnectionError):
        return "cannot connect" + (f" ({text.split(':')[-1].strip(_QUOTES)})" if text else "")
    if isinstance(exc, requests.Timeout):
        return "timed out"
    return text.splitlines()[0] if text else type(exc).__name__


def _detail(parsed: object, resp: requests.Response) -> str:
    if isinstance(parsed, dict):
        errors = parsed.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            first = errors[0]
            code = f" [{first['code']}]" if first.get("code") else ""
            return " ".join(str(first.get("detail", "")).split()) + code
        if "message" in parsed:
            return str(parsed["message"])
    return resp.reason or "error"


def parallel(work: Callable[[T], R], items: Iterable[T], *, workers: int,
             done: Callable[[], None] | None = None) -> Iterator[R]:
    """``work`` over ``items`` on ``workers`` threads, results in input order;
    ``done`` is called as each finishes (for progress). The first failure is
    raised once the running calls have ended."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        for item in items:
            result = work(item)
            if done:
                done()
            yield result
        return

    def run(item: T) -> R:
        result = work(item)
        if done:
            done()
        return result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run, item) for item in items]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()
