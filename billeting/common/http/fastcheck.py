"""A yes/no JSON Schema check compiled to plain Python closures.

jsonschema walks a schema through its generic validator machinery on every
request (about 0.4 ms for an allocation or inventory body, as much as the
rest of the request's Python work). Request bodies are nearly always valid,
so ``util.validate`` first asks the closure built here; only a body it does
not accept goes through jsonschema, which then finds the error and words it
exactly as before.

The closure may say "no" when in doubt (jsonschema decides then), but it must
never say "yes" to anything jsonschema refuses. It therefore understands
only the Draft 4 keywords Billeting's schemas use, with the same
type rules (``integer`` is an int, never a float or bool) and the project's
own ``pattern`` and ``format`` semantics passed in by the caller. A schema
with any other keyword is not compiled at all (``compile_schema`` returns
None) and always goes through jsonschema.
"""
from __future__ import annotations

from collections.abc import Callable

Check = Callable[[object], bool]

_TYPES: dict[str, Callable[[object], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
# Keywords that never change the verdict.
_ANNOTATIONS = {"description", "title", "$schema", "default", "examples"}


class Unsupported(Exception):
    """The schema uses something this module does not understand."""


def compile_schema(schema: dict, *, pattern: Callable[[str], Callable[[str], bool]],
                   formats: dict[str, Callable[[object], bool]]) -> Check | None:
    """The check for ``schema``, or None when it must be left to jsonschema.

    ``pattern(regex)`` returns the matcher a ``pattern`` keyword uses;
    ``formats`` maps each checked format name to its test.
    """
    try:
        return _compile(schema, pattern, formats)
    except Unsupported:
        return None


def _compile(schema, pattern, formats) -> Check:
    if not isinstance(schema, dict):
        raise Unsupported("schema is not an object")
    checks: list[Check] = []
    keys = set(schema) - _ANNOTATIONS
    if "type" in keys:
        checks.append(_type(schema["type"]))
    if keys & {"properties", "required", "additionalProperties", "patternProperties",
               "minProperties", "maxProperties"}:
        checks.append(_object(schema, pattern, formats))
    if keys & {"items", "minItems", "maxItems", "uniqueItems"}:
        checks.append(_array(schema, pattern, formats))
    if keys & {"minLength", "maxLength", "pattern", "format"}:
        checks.append(_string(schema, pattern, formats))
    if keys & {"minimum", "maximum"}:
        checks.append(_number(schema))
    if "enum" in keys:
        checks.append(_enum(schema["enum"]))
    for name, combine in (("anyOf", any), ("allOf", all)):
        if name in keys:
            subs = [_compile(sub, pattern, formats) for sub in schema[name]]
            checks.append(lambda v, subs=subs, combine=combine: combine(s(v) for s in subs))
    unknown = keys - _KNOWN
    if unknown:
        raise Unsupported(f"keywords {sorted(unknown)}")
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)

    def every(v) -> bool:
        for check in checks:
            if not check(v):
                return False
        return True

    return every


_KNOWN = {"type", "properties", "required", "additionalProperties", "patternProperties",
          "minProperties", "maxProperties", "items", "minItems", "maxItems", "uniqueItems",
          "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "enum",
          "anyOf", "allOf"}


def _type(spec) -> Check:
    names = [spec] if isinstance(spec, str) else list(spec)
    if not names or any(name not in _TYPES for name in names):
        raise Unsupported(f"type {spec!r}")
    tests = [_TYPES[name] for name in names]
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _object(schema, pattern, formats) -> Check:
    props = {key: _compile(sub, pattern, formats) for key, sub in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    patterns = [(pattern(regex), _compile(sub, pattern, formats))
                for regex, sub in schema.get("patternProperties", {}).items()]
    extra = schema.get("additionalProperties", True)
    if extra is True:
        extra_check = None
    elif extra is False:
        extra_check = False
    else:
        extra_check = _compile(extra, pattern, formats)
    low = schema.get("minProperties", 0)
    high = schema.get("maxProperties")
    if not isinstance(low, int) or not (high is None or isinstance(high, int)):
        raise Unsupported("minProperties / maxProperties")

    def check(v) -> bool:
        if not isinstance(v, dict):
            return True
        if len(v) < low or (high is not None and len(v) > high):
            return False
        for key in required:
            if key not in v:
                return False
        for key, value in v.items():
            sub = props.get(key)
            matched = sub is not None
            if matched and not sub(value):
                return False
            if patterns:
                for matches, sub_check in patterns:
                    if matches(key):
                        matched = True
                        if not sub_check(value):
                            return False
            if not matched and extra_check is not None:
                if extra_check is False or not extra_check(value):
                    return False
        return True

    return check


def _array(schema, pattern, formats) -> Check:
    items = schema.get("items")
    if items is not None and not isinstance(items, dict):
        raise Unsupported("items as a list")
    item_check = _compile(items, pattern, formats) if items is not None else None
    low = schema.get("minItems", 0)
    high = schema.get("maxItems")
    unique = schema.get("uniqueItems", False)
    if unique not in (True, False):
        raise Unsupported("uniqueItems")

    def check(v) -> bool:
        if not isinstance(v, list):
            return True
        if len(v) < low or (high is not None and len(v) > high):
            return False
        if item_check is not None:
            for item in v:
                if not item_check(item):
                    return False
        if unique:
            # Only strings are compared here; other items go to jsonschema,
            # whose equality rules (1 vs True vs 1.0) are its own.
            if not all(isinstance(item, str) for item in v) or len(set(v)) != len(v):
                return False
        return True

    return check


def _string(schema, pattern, formats) -> Check:
    low = schema.get("minLength", 0)
    high = schema.get("maxLength")
    matches = pattern(schema["pattern"]) if "pattern" in schema else None
    fmt = None
    if "format" in schema:
        fmt = formats.get(schema["format"])
        if fmt is None:
            raise Unsupported(f"format {schema['format']!r}")

    def check(v) -> bool:
        # ``format`` applies to any type (the test decides); the rest to strings.
        if fmt is not None and not fmt(v):
            return False
        if not isinstance(v, str):
            return True
        if len(v) < low or (high is not None and len(v) > high):
            return False
        return matches is None or matches(v)

    return check


def _number(schema) -> Check:
    low = schema.get("minimum")
    high = schema.get("maximum")

    def check(v) -> bool:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return True
        return (low is None or v >= low) and (high is None or v <= high)

    return check


def _enum(values) -> Check:
    if not all(value is None or isinstance(value, (str, bool, int)) for value in values):
        raise Unsupported("enum of non-scalars")
    allowed = [(type(value), value) for value in values]
    # Type and value both must match: jsonschema tells True from 1.
    return lambda v: (type(v), v) in allowed
