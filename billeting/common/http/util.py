"""Request helpers every service's handlers share: the caller's context and
policy check, JSON bodies and query strings checked against JSON Schema, and
the plain response shapes."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qsl

import falcon
import jsonschema
import orjson
from jsonschema.exceptions import ValidationError, best_match

from billeting.common.http.inputs import nul_at
from billeting.common.http.json_depth import TOO_DEEP, too_deep
from billeting.common.http import fastcheck
from billeting.common.http.context import RequestContext
from billeting.common.http.errors import HTTPProblem
from billeting.common.uuids import is_uuid_like

JSON = "application/json"
MAX_BODY_BYTES = 16 * 1024 * 1024


def ctx(req: falcon.Request) -> RequestContext:
    return req.context.auth


def authorize(req: falcon.Request, rule: str, target: dict | None = None) -> None:
    req.context.deps.authorizer.authorize(req.context.auth, rule, target)


# --- UUIDs (the rule itself: billeting.common.uuids) -----------------------

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
                f"Additional properties are not allowed ({', '.join(map(repr, sorted(extras)))} "
                f"{verb} unexpected)")


_StrictDraft4 = jsonschema.validators.extend(jsonschema.Draft4Validator, {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
})


def _pattern_matcher(pattern: str):
    """``pattern_matches`` for one pattern, compiled once."""
    regex = re.compile(pattern)

    def matches(text: str) -> bool:
        found = regex.search(text)
        return found is not None and not (text.endswith("\n") and found.end() == len(text) - 1)

    return matches


@dataclass(frozen=True, slots=True)
class _Checker:
    strict: jsonschema.protocols.Validator   # finds and words the error
    fast: fastcheck.Check | None             # yes/no, for the common valid case


@lru_cache(maxsize=None)
def _checker(schema_json: bytes) -> _Checker:
    schema = orjson.loads(schema_json)
    fast = fastcheck.compile_schema(schema, pattern=_pattern_matcher, formats={"uuid": _check_uuid})
    return _Checker(_StrictDraft4(schema, format_checker=_FORMATS), fast)


def _checker_for(schema: dict) -> _Checker:
    # Keyed by the schema's text with its keys in their own order: the
    # validator's messages print the schema, and in that order.
    return _checker(orjson.dumps(schema))


def validator_for(schema: dict) -> jsonschema.protocols.Validator:
    return _checker_for(schema).strict


# How much of a failure a brief message quotes (the instance may be megabytes).
BRIEF_CHARS = 300


def cut_short(text: str) -> str:
    """``text`` cut at ``BRIEF_CHARS``, for messages that may quote a huge input."""
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS] + "…"


# A limit that failed, named (the validator's own message quotes the value
# first, and a long value cut short hides the limit).
_BRIEF_LIMITS = {"maxLength": "the value is longer than {} characters", "maxItems": "the list has more than {} items",
                 "maxProperties": "the object has more than {} entries"}


def validate(data: object, schema: dict, *, prefix: str = "JSON does not validate: ", brief: bool = False) -> None:
    """400 with the validator's whole message (what failed, the schema
    part and the instance), as upstream reports it; ``brief`` (Billeting's
    own APIs, no upstream to match): what failed, cut short, and where.
    Valid bodies are recognised by a compiled check first, which never
    accepts what the validator would refuse (tests/unit/test_fastcheck.py)."""
    checker = _checker_for(schema)
    if checker.fast is not None and checker.fast(data):
        return
    error = best_match(checker.strict.iter_errors(data))
    if error is None:
        return
    if not brief:
        raise HTTPProblem(400, f"{prefix}{error}")
    message = cut_short(_BRIEF_LIMITS[error.validator].format(error.validator_value)
                        if error.validator in _BRIEF_LIMITS else error.message)
    where = "/".join(str(part) for part in error.absolute_path)
    raise HTTPProblem(400, f"{prefix}{message}" + (f" (at /{where})" if where else ""))


def validate_query(params: dict[str, str], schema: dict) -> None:
    """Query parameters (all strings) against a query schema. Valid ones are
    recognised by a direct reading of the few keywords query schemas use;
    the validator proper runs only to find and word a failure (or when the
    quick reading is unsure)."""
    if _query_surely_valid(params, schema):
        return
    validate(params, schema, prefix="Invalid query string parameters: ")


_STRING_TYPES = ("string", ["string"], ["integer", "string"])
_QUICK_KEYWORDS = frozenset({"type", "pattern", "enum", "minLength", "maxLength", "format", "minimum"})


def _query_surely_valid(params: dict[str, str], schema: dict) -> bool:
    """True only if ``schema`` certainly accepts ``params``; False means "ask
    the validator" (it may still be valid)."""
    if not all(key in params for key in schema.get("required", ())):
        return False
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    closed = schema.get("additionalProperties") is False
    for key, value in params.items():
        applies = [properties[key]] if key in properties else []
        applies += [sub for pattern, sub in patterns.items() if pattern_matches(pattern, key)]
        if not applies and closed:
            return False
        if not all(_string_surely_valid(value, sub) for sub in applies):
            return False
    return True


def _string_surely_valid(value: str, schema: dict) -> bool:
    if not schema.keys() <= _QUICK_KEYWORDS or schema.get("type", "string") not in _STRING_TYPES:
        return False
    if "pattern" in schema and not pattern_matches(schema["pattern"], value):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        return False
    return schema.get("format") in (None, "uuid") and (schema.get("format") is None or is_uuid_like(value))


def require_json_content(req: falcon.Request) -> None:
    content_type = req.content_type
    media = content_type.split(";")[0].strip().lower() if content_type else None
    if media != JSON:
        raise HTTPProblem(415, f"The media type {media} is not supported, use application/json")


def read_json(req: falcon.Request, schema: dict | None = None) -> object:
    """Parse the body as JSON and validate it against ``schema``."""
    raw = req.bounded_stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise HTTPProblem(400, f"Request body is larger than {MAX_BODY_BYTES} bytes.")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HTTPProblem(400, f"Malformed JSON: {exc}") from None
    # Before anything that recurses (the NUL search, the validator).
    if too_deep(raw, data):
        raise HTTPProblem(400, f"Malformed JSON: {TOO_DEEP}")
    # In JSON text a NUL can only be written as the escape \u0000.
    if b"\\u0000" in raw:
        where = _nul_position(data)
        if where is not None:
            raise HTTPProblem(400, "JSON does not validate: NUL characters (\\u0000) are not allowed "
                                   f"in strings: {where}")
    if schema is not None:
        validate(data, schema)
    return data


def _nul_position(data: object) -> str | None:
    """Where ``data`` holds a NUL, in the validator's notation
    (``instance['name']``, ``instance (key 'a\\x00')``); None when nowhere."""
    found = nul_at(data)
    if found is None:
        return None
    path, in_key = found
    parents = path[:-1] if in_key else path
    where = "instance" + "".join(f"[{part!r}]" for part in parents)
    return f"{where} (key {path[-1]!r})" if in_key else where


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


def send_empty(resp: falcon.Response, status: int = 204) -> None:
    resp.status = status
    resp.data = b""
    resp.content_type = None


def href(req: falcon.Request, path: str) -> str:
    """A link relative to the host, including the mount prefix."""
    return f"{req.root_path or ''}{path}"


def location(req: falcon.Request, path: str) -> str:
    """An absolute URL for the ``Location`` header."""
    return f"{req.prefix}{path}"
