"""Helpers every handler uses: version gates, body and query parsing, response shaping."""
from __future__ import annotations

import datetime as dt
import re
import uuid as uuidlib
from email.utils import format_datetime
from functools import lru_cache
from urllib.parse import parse_qsl

import falcon
import jsonschema
import orjson
from jsonschema.exceptions import ValidationError, best_match

from billeting.placement import providers
from billeting.placement.api.context import RequestContext
from billeting.placement.api.errors import HTTPProblem

JSON = "application/json"
MAX_BODY_BYTES = 16 * 1024 * 1024


# --- microversion ---------------------------------------------------------

def mv(req: falcon.Request) -> tuple[int, int]:
    return req.context.mv


def require_version(req: falcon.Request, minimum: tuple[int, int], *, status: int = 404) -> None:
    """Answer as if the route did not exist when the version is too old."""
    if req.context.mv < minimum:
        if status == 405:
            raise HTTPProblem(405, "The method specified is not allowed for this resource.")
        raise HTTPProblem(404, "The resource could not be found.")


def ctx(req: falcon.Request) -> RequestContext:
    return req.context.auth


def authorize(req: falcon.Request, rule: str, target: dict | None = None) -> None:
    req.context.deps.authorizer.authorize(req.context.auth, rule, target)


# --- UUIDs ----------------------------------------------------------------

def is_uuid_like(value: object) -> bool:
    """Anything ``uuid.UUID()`` accepts once urn:/uuid:/braces/dashes are stripped."""
    if not isinstance(value, str):
        return False
    text = value.strip().lower()
    for prefix in ("urn:", "uuid:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = text.strip("{}").replace("-", "")
    if len(text) != 32:
        return False
    try:
        uuidlib.UUID(text)
    except ValueError:
        return False
    return True


def normalize_uuid(value: str) -> str:
    text = value.strip().lower()
    for prefix in ("urn:", "uuid:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return str(uuidlib.UUID(text.strip("{}").replace("-", "")))


_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("uuid")
def _check_uuid(value: object) -> bool:
    return not isinstance(value, str) or is_uuid_like(value)


def pattern_matches(pattern: str, text: str) -> bool:
    """``re.search`` as JSON Schema uses it, except that ``$`` may not match
    just before a final newline (Python's rule), so "NAME\\n" never passes
    for "^NAME$". The message texts of the standard validator are kept."""
    found = re.search(pattern, text)
    if found is None:
        return False
    return not (text.endswith("\n") and found.end() == len(text) - 1)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not pattern_matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if pattern_matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [key for key in instance
              if key not in properties and not any(pattern_matches(p, key) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(
                f"{', '.join(map(repr, sorted(extras)))} {verb} not match any of the regexes: "
                f"{', '.join(map(repr, sorted(patterns)))}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({', '.join(map(repr, extras))} {verb} unexpected)")


_StrictDraft4 = jsonschema.validators.extend(jsonschema.Draft4Validator, {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
})


@lru_cache(maxsize=None)
def _validator(schema_key: int, schema_json: bytes) -> jsonschema.protocols.Validator:
    return _StrictDraft4(orjson.loads(schema_json), format_checker=_FORMATS)


def validator_for(schema: dict) -> jsonschema.protocols.Validator:
    blob = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    return _validator(hash(blob), blob)


def validate(data: object, schema: dict, *, prefix: str = "JSON does not validate: ") -> None:
    error = best_match(validator_for(schema).iter_errors(data))
    if error is not None:
        raise HTTPProblem(400, f"{prefix}{error}")


# --- request bodies -------------------------------------------------------

def require_json_content(req: falcon.Request) -> None:
    content_type = req.content_type
    media = content_type.split(";")[0].strip().lower() if content_type else None
    if media != JSON:
        raise HTTPProblem(415, f"The media type {media} is not supported, use application/json")


def require_accept_json(req: falcon.Request) -> None:
    accept = req.get_header("Accept")
    if accept and not (req.client_accepts(JSON)):
        raise HTTPProblem(406, "Only application/json is provided")


def read_json(req: falcon.Request, schema: dict | None = None) -> object:
    """Parse the body as JSON and validate it against ``schema``."""
    raw = req.bounded_stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise HTTPProblem(400, f"Request body is larger than {MAX_BODY_BYTES} bytes.")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HTTPProblem(400, f"Malformed JSON: {exc}") from None
    if schema is not None:
        validate(data, schema)
    return data


# --- query strings --------------------------------------------------------

def query_pairs(req: falcon.Request) -> list[tuple[str, str]]:
    """Ordered (key, value) pairs, blank values kept; undecodable → 400."""
    qs = req.query_string
    if not qs:
        return []
    try:
        pairs = parse_qsl(qs, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise HTTPProblem(400, "Invalid query string parameters: the query string is not valid UTF-8.") from None
    if "\x00" in qs or any("\x00" in k or "\x00" in v for k, v in pairs):
        raise HTTPProblem(400, "Invalid query string parameters: NUL characters are not allowed.")
    return pairs


def query_last(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Each key's last value (the rule for non-repeatable parameters)."""
    return dict(pairs)


def query_all(pairs: list[tuple[str, str]], key: str) -> list[str]:
    return [v for k, v in pairs if k == key]


def check_query_keys(pairs: list[tuple[str, str]], allowed: set[str] | frozenset[str]) -> None:
    unknown = sorted({k for k, _ in pairs if k not in allowed})
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise HTTPProblem(
            400,
            f"Invalid query string parameters: Additional properties are not allowed "
            f"({names} {'was' if len(unknown) == 1 else 'were'} unexpected)")


# --- responses ------------------------------------------------------------

def http_date(when: dt.datetime | None) -> str:
    when = when or providers.utcnow()
    return format_datetime(when.replace(tzinfo=dt.UTC), usegmt=True)


def send_json(req: falcon.Request, resp: falcon.Response, body: object, *,
              status: int = 200, last_modified: dt.datetime | None = None,
              cache_headers: bool = True) -> None:
    resp.status = status
    resp.content_type = JSON
    resp.data = orjson.dumps(body)
    if cache_headers:
        set_cache_headers(req, resp, last_modified)


def set_cache_headers(req: falcon.Request, resp: falcon.Response,
                      last_modified: dt.datetime | None) -> None:
    if req.context.mv >= (1, 15):
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("Last-Modified", http_date(last_modified))


def send_empty(resp: falcon.Response, status: int = 204) -> None:
    resp.status = status
    resp.data = b""
    resp.content_type = None


def newest(*stamps: dt.datetime | None) -> dt.datetime | None:
    present = [s for s in stamps if s is not None]
    return max(present) if present else None


def href(req: falcon.Request, path: str) -> str:
    """A link relative to the host, including the mount prefix."""
    return f"{req.root_path or ''}{path}"


def location(req: falcon.Request, path: str) -> str:
    """An absolute URL for the ``Location`` header."""
    return f"{req.prefix}{path}"
