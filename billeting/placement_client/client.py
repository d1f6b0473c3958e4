"""A Placement client: typed calls over a transport (HTTP or in-process WSGI).

It negotiates the highest microversion both sides speak (at most 1.39, at
least 1.29: nested-aware candidates and consumer generations), sends every
request at that version, and turns answers into the Structs of ``model``.
Writes report how Placement answered (``WriteOutcome``) rather than raising,
because a refused claim is an everyday outcome for a scheduler; anything
else unexpected raises ``PlacementError`` with Placement's own detail.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar
from urllib.parse import quote, urlencode

import msgspec

from billeting import typeinfo
from billeting.placement_client import query as query_mod
from billeting.placement_client.answer_memo import CandidatesDecoder
from billeting.placement_client.model import (
    AllocationWrite,
    CandidateQuery,
    Candidates,
    ConsumerAllocations,
    Inventory,
    NewProvider,
    ProviderAggregates,
    ProviderAllocations,
    ProviderInventories,
    ProviderRecord,
    ProviderTraits,
    WriteOutcome,
    WriteResult,
)
from billeting.placement_client.transport import Response, Transport, TransportError

T = TypeVar("T")
MIN_VERSION = (1, 29)
MAX_VERSION = (1, 39)
CONCURRENT_UPDATE = "placement.concurrent_update"


class PlacementError(Exception):
    """Placement answered something the caller cannot treat as an outcome."""

    def __init__(self, status: int, detail: str, code: str | None = None) -> None:
        super().__init__(f"Placement answered {status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail
        self.code = code


class PlacementUnavailable(PlacementError):
    """No answer, or a 5xx: Placement is down or broken, not the request."""


class _Error(msgspec.Struct):
    status: int = 0
    detail: str = ""
    code: str | None = None


class _Errors(msgspec.Struct):
    errors: list[_Error] = []


class _VersionDoc(msgspec.Struct):
    max_version: str = ""
    min_version: str = ""
    id: str = ""


class _Root(msgspec.Struct):
    versions: list[_VersionDoc] = []


class _Usages(msgspec.Struct):
    usages: dict[str, int]


class _Generation(msgspec.Struct):
    resource_provider_generation: int


class _ProviderList(msgspec.Struct):
    resource_providers: list[ProviderRecord]


_decode_allocations = typeinfo.decoder(ConsumerAllocations).decode
_decode_providers = typeinfo.decoder(_ProviderList).decode
_decode_aggregates = typeinfo.decoder(ProviderAggregates).decode
_decode_traits = typeinfo.decoder(ProviderTraits).decode
_decode_inventories = typeinfo.decoder(ProviderInventories).decode
_decode_provider_allocations = typeinfo.decoder(ProviderAllocations).decode
_decode_provider = typeinfo.decoder(ProviderRecord).decode
_decode_errors = typeinfo.decoder(_Errors).decode
_decode_usages = typeinfo.decoder(_Usages).decode
_decode_generation = typeinfo.decoder(_Generation).decode
_decode_root = typeinfo.decoder(_Root).decode
_encode = msgspec.json.Encoder().encode


def parse_version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor)


def version_str(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def error_of(resp: Response) -> _Error:
    try:
        errors = _decode_errors(resp.body).errors
    except msgspec.DecodeError:
        errors = []
    if errors:
        return errors[0]
    return _Error(status=resp.status, detail=resp.body[:200].decode(errors="replace"))


def _read(decode: Callable[[bytes], T], resp: Response) -> T:
    """The typed answer; an answer of the wrong shape (a URL that is not a
    Placement, a proxy's page) is Placement being unusable, not a bug here."""
    try:
        return decode(resp.body)
    except msgspec.DecodeError as exc:
        raise PlacementUnavailable(resp.status, f"the answer is not what Placement answers: {exc}") from None


def classify_write(resp: Response) -> WriteOutcome:
    """What an allocation write's answer means for the writer."""
    if resp.status in (200, 204):
        return WriteOutcome(WriteResult.OK)
    if resp.status >= 500:
        err = error_of(resp)
        raise PlacementUnavailable(resp.status, err.detail, err.code)
    err = error_of(resp)
    if resp.status == 409:
        if err.code == CONCURRENT_UPDATE:
            if "consumer generation conflict" in err.detail:
                return WriteOutcome(WriteResult.CONSUMER_CONFLICT, err.detail)
            return WriteOutcome(WriteResult.PROVIDER_CONFLICT, err.detail)
        return WriteOutcome(WriteResult.NO_CAPACITY, err.detail)
    if resp.status == 400:
        return WriteOutcome(WriteResult.INVALID, err.detail)
    raise PlacementError(resp.status, err.detail, err.code)


class Auth:
    """Headers that authenticate a request. The default is a fixed token,
    which is what ``noauth2`` expects (``admin``)."""

    def __init__(self, token: str = "admin") -> None:
        self.token = token

    def headers(self) -> dict[str, str]:
        return {"X-Auth-Token": self.token}

    def invalidate(self) -> None:
        """Forget cached credentials after a 401 (keystone tokens expire)."""


class KeystoneAuth(Auth):
    """Tokens from a keystoneauth1 session (any auth plugin it supports)."""

    def __init__(self, session) -> None:
        super().__init__("")
        self.session = session

    def headers(self) -> dict[str, str]:
        return dict(self.session.get_auth_headers() or {})

    def invalidate(self) -> None:
        self.session.invalidate()


class PlacementClient:
    """Thread-safe; one per process is enough."""

    def __init__(self, transport: Transport, *, auth: Auth | None = None,
                 version: tuple[int, int] | None = None) -> None:
        self.transport = transport
        self.auth = auth or Auth()
        self._version = version
        self._lock = threading.Lock()
        self._candidates = CandidatesDecoder()

    # --- plumbing ---------------------------------------------------------------

    @property
    def version(self) -> tuple[int, int]:
        """The negotiated microversion (asked once, on first use)."""
        if self._version is None:
            with self._lock:
                if self._version is None:
                    self._version = self._negotiate()
        return self._version

    @property
    def version_text(self) -> str:
        return version_str(self.version)

    def _negotiate(self) -> tuple[int, int]:
        resp = self._send("GET", "/", None, versioned=False)
        if resp.status != 200:
            raise PlacementUnavailable(resp.status, "GET / did not return the version document")
        try:
            docs = _decode_root(resp.body).versions
            offered = parse_version(docs[0].max_version)
        except (msgspec.DecodeError, IndexError, ValueError):
            raise PlacementError(resp.status, "GET / returned no usable version document") from None
        if offered < MIN_VERSION:
            raise PlacementError(0, f"Placement offers microversion {version_str(offered)}; "
                                    f"Billeting needs at least {version_str(MIN_VERSION)}")
        return min(offered, MAX_VERSION)

    def _send(self, method: str, path: str, body: bytes | None, *, versioned: bool = True,
              version: str | None = None) -> Response:
        headers = {"Accept": "application/json"}
        if versioned:
            headers["OpenStack-API-Version"] = f"placement {version or self.version_text}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            headers.update(self.auth.headers())
            try:
                resp = self.transport.request(method, path, body, headers)
            except TransportError as exc:
                raise PlacementUnavailable(0, str(exc)) from None
            if resp.status == 401 and attempt == 1:
                self.auth.invalidate()
                continue
            return resp
        return resp

    def _expect(self, resp: Response, *ok: int) -> Response:
        if resp.status in ok:
            return resp
        err = error_of(resp)
        cls = PlacementUnavailable if resp.status >= 500 or resp.status == 0 else PlacementError
        raise cls(resp.status, err.detail, err.code)

    # --- candidates and allocations -------------------------------------------

    def allocation_candidates(self, query: CandidateQuery) -> Candidates:
        """Raises ``query.UnsupportedQuery`` when the query needs a newer
        microversion, ``PlacementError`` (400) when Placement rejects it."""
        qs = query_mod.query_string(query, self.version)
        resp = self._expect(self._send("GET", "/allocation_candidates?" + qs, None), 200)
        version = self.version_text
        return _read(lambda body: self._candidates.decode(body, version), resp)

    def get_allocations(self, consumer_uuid: str) -> ConsumerAllocations:
        resp = self._expect(self._send("GET", f"/allocations/{quote(consumer_uuid)}", None), 200)
        return _read(_decode_allocations, resp)

    def put_allocations(self, consumer_uuid: str, write: AllocationWrite, *,
                        version: str | None = None) -> WriteOutcome:
        version = self._untyped_version(version, write)
        body = self._write_body(write, version)
        return classify_write(self._send("PUT", f"/allocations/{quote(consumer_uuid)}", body, version=version))

    def post_allocations(self, writes: Mapping[str, AllocationWrite]) -> WriteOutcome:
        """Several consumers in one transaction (moves, docs/design/moves.md#the-consumer-swap)."""
        version = self._untyped_version(None, *writes.values())
        body = b"{" + b",".join(_encode(uuid) + b":" + self._write_body(w, version)
                                for uuid, w in writes.items()) + b"}"
        return classify_write(self._send("POST", "/allocations", body, version=version))

    def _untyped_version(self, version: str | None, *writes: AllocationWrite) -> str | None:
        """Placement requires ``consumer_type`` from 1.38 on: a write without
        one is sent at 1.37, which gives the consumer Placement's default type."""
        mv = parse_version(version) if version else self.version
        if mv >= (1, 38) and any(w.consumer_type is None for w in writes):
            return "1.37"
        return version

    def delete_allocations(self, consumer_uuid: str) -> bool:
        """Force-delete a consumer's allocations; False when it held none."""
        resp = self._send("DELETE", f"/allocations/{quote(consumer_uuid)}", None)
        if resp.status == 404:
            return False
        self._expect(resp, 204)
        return True

    def _write_body(self, write: AllocationWrite, version: str | None) -> bytes:
        mv = parse_version(version) if version else self.version
        if write.mappings is not None and mv < (1, 34):
            write = msgspec.structs.replace(write, mappings=None)
        if write.consumer_type is not None and mv < (1, 38):
            write = msgspec.structs.replace(write, consumer_type=None)
        return _encode(write)

    # --- providers and aggregates -----------------------------------------------

    def list_providers(self, *, member_of: Iterable[str] | None = None, in_tree: str | None = None,
                       resources: Mapping[str, int] | None = None, required: Iterable[str] | None = None,
                       name: str | None = None) -> list[ProviderRecord]:
        params: list[tuple[str, str]] = []
        if member_of is not None:
            params.append(("member_of", "in:" + ",".join(sorted(member_of))))
        if in_tree:
            params.append(("in_tree", in_tree))
        if resources:
            params.append(("resources", ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))))
        if required:
            params.append(("required", ",".join(sorted(required))))
        if name is not None:
            params.append(("name", name))
        path = "/resource_providers" + ("?" + urlencode(params, safe=":,!") if params else "")
        resp = self._expect(self._send("GET", path, None), 200)
        return _read(_decode_providers, resp).resource_providers

    def get_provider(self, provider_uuid: str) -> ProviderRecord | None:
        resp = self._send("GET", f"/resource_providers/{quote(provider_uuid)}", None)
        if resp.status == 404:
            return None
        return _read(_decode_provider, self._expect(resp, 200))

    def create_provider(self, name: str, *, uuid: str | None = None,
                        parent_provider_uuid: str | None = None) -> ProviderRecord:
        """Raises PlacementError (409) when the name or uuid is taken."""
        body: dict = {"name": name}
        if uuid:
            body["uuid"] = uuid
        if parent_provider_uuid:
            body["parent_provider_uuid"] = parent_provider_uuid
        resp = self._expect(self._send("POST", "/resource_providers", _encode(body)), 200)
        return _read(_decode_provider, resp)

    def create_providers(self, new: Sequence[NewProvider]) -> None:
        """Create each provider of ``new`` in turn (parents before their
        children) with its inventories, traits and aggregates, through the
        standard calls; raises PlacementError on the first refusal. The
        in-process client writes the same in a few transactions."""
        for p in new:
            generation = self.create_provider(p.name, uuid=p.uuid,
                                              parent_provider_uuid=p.parent_uuid).generation
            if p.inventories:
                generation = self.put_inventories(p.uuid, generation, p.inventories)
            if p.traits:
                wrote = self.put_traits(p.uuid, p.traits, generation)
                if not wrote.ok:
                    raise PlacementError(409, f"traits of {p.uuid}: {wrote.detail}")
                generation = self.get_traits(p.uuid).resource_provider_generation
            if p.aggregates:
                wrote = self.put_aggregates(p.uuid, p.aggregates, generation)
                if not wrote.ok:
                    raise PlacementError(409, f"aggregates of {p.uuid}: {wrote.detail}")

    def delete_provider(self, provider_uuid: str) -> bool:
        resp = self._send("DELETE", f"/resource_providers/{quote(provider_uuid)}", None)
        if resp.status == 404:
            return False
        self._expect(resp, 204)
        return True

    def put_inventories(self, provider_uuid: str, generation: int,
                        inventories: Mapping[str, Inventory]) -> int:
        """Replace every inventory; returns the new provider generation.
        Raises PlacementError (409) on a generation conflict or inventory in use."""
        body = {"resource_provider_generation": generation,
                "inventories": {rc: {k: v for k, v in msgspec.structs.asdict(inv).items()
                                     if not (k == "max_unit" and v is None)}
                                for rc, inv in inventories.items()}}
        resp = self._expect(self._send("PUT", f"/resource_providers/{quote(provider_uuid)}/inventories",
                                       _encode(body)), 200)
        return _read(_decode_generation, resp).resource_provider_generation

    def provider_usages(self, provider_uuid: str) -> dict[str, int]:
        """Resource class → amount allocated on the provider."""
        resp = self._expect(self._send("GET", f"/resource_providers/{quote(provider_uuid)}/usages", None), 200)
        return _read(_decode_usages, resp).usages

    def get_inventories(self, provider_uuid: str) -> ProviderInventories:
        resp = self._expect(self._send("GET", f"/resource_providers/{quote(provider_uuid)}/inventories", None),
                            200)
        return _read(_decode_inventories, resp)

    def provider_allocations(self, provider_uuid: str) -> ProviderAllocations:
        """Every consumer holding something on the provider (audits)."""
        resp = self._expect(self._send("GET", f"/resource_providers/{quote(provider_uuid)}/allocations", None),
                            200)
        return _read(_decode_provider_allocations, resp)

    def get_traits(self, provider_uuid: str) -> ProviderTraits:
        resp = self._expect(self._send("GET", f"/resource_providers/{quote(provider_uuid)}/traits", None), 200)
        return _read(_decode_traits, resp)

    def put_traits(self, provider_uuid: str, traits: Iterable[str], generation: int) -> WriteOutcome:
        body = _encode({"traits": sorted(set(traits)), "resource_provider_generation": generation})
        return classify_write(self._send("PUT", f"/resource_providers/{quote(provider_uuid)}/traits", body))

    def ensure_trait(self, name: str) -> None:
        """Create a custom trait if it does not exist."""
        self._expect(self._send("PUT", f"/traits/{quote(name)}", None), 201, 204)

    def ensure_resource_class(self, name: str) -> None:
        self._expect(self._send("PUT", f"/resource_classes/{quote(name)}", None), 201, 204)

    def get_aggregates(self, provider_uuid: str) -> ProviderAggregates:
        resp = self._expect(self._send("GET", f"/resource_providers/{quote(provider_uuid)}/aggregates", None), 200)
        return _read(_decode_aggregates, resp)

    def put_aggregates(self, provider_uuid: str, aggregates: Iterable[str], generation: int) -> WriteOutcome:
        body = _encode({"aggregates": sorted(set(aggregates)), "resource_provider_generation": generation})
        return classify_write(self._send("PUT", f"/resource_providers/{quote(provider_uuid)}/aggregates", body))

    def close(self) -> None:
        self.transport.close()
