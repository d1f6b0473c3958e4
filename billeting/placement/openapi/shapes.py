"""Response bodies of the Placement API, each a function of the microversion
(docs/design/placement-endpoints.md, docs/design/allocation-candidates.md#answer).
``versions.by_version`` turns a function into the document's per-range alternatives, so a range is never written by hand.

Strict on purpose: every key is listed and required where upstream says it
is always present, and nothing else is allowed, so the fuzz tests notice a
response that grew or lost a field. Values that Placement stores verbatim
(aggregate uuids, consumer uuids written by ``POST /allocations``) are plain
strings here, not ``format: uuid``.
"""
from __future__ import annotations

from billeting.placement import errors
from billeting.placement.api.schemas.allocations import UUID_KEY
from billeting.placement.inventories import MAX_INT

Version = tuple[int, int]

RC_KEY = "^[A-Z0-9_]+$"
UUID = {"type": "string", "format": "uuid"}
GENERATION = {"type": "integer", "minimum": 0}
COUNT = {"type": "integer", "minimum": 0}
TEXT = {"type": "string"}
NULLABLE_UUID = {"anyOf": [UUID, {"type": "null"}]}
REQUEST_ID = {"type": "string", "pattern": "^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}
CODES = sorted(value for name, value in vars(errors).items()
               if name.isupper() and isinstance(value, str) and value.startswith("placement."))


def obj(properties: dict, *, optional: tuple[str, ...] = ()) -> dict:
    """A closed object: every property required unless named in ``optional``."""
    return {"type": "object", "properties": properties,
            "required": [name for name in properties if name not in optional],
            "additionalProperties": False}


def keyed(pattern: str, value: dict, **extra) -> dict:
    """An object whose keys match ``pattern`` and whose values are ``value``."""
    return {"type": "object", "propertyNames": {"pattern": pattern}, "additionalProperties": value, **extra}


def links(*rels: str) -> dict:
    """A list of exactly these links (spec order: as listed)."""
    return {"type": "array", "minItems": len(rels), "maxItems": len(rels), "uniqueItems": True,
            "items": obj({"rel": {"enum": list(rels)}, "href": TEXT})}


AMOUNTS = keyed(RC_KEY, {"type": "integer", "minimum": 1}, minProperties=1)
USAGES = keyed(RC_KEY, COUNT)


# --- errors --------------------------------------------------------------------------

def error(mv: Version | None) -> dict:
    """The one-element ``errors`` list (docs/design/placement-http.md#errors). ``code`` appears only when a
    microversion of 1.23 or later was negotiated; ``min_version`` and
    ``max_version`` only on a 406 from version negotiation."""
    item = {"status": {"type": "integer", "minimum": 400, "maximum": 599}, "title": TEXT, "detail": TEXT,
            "request_id": REQUEST_ID, "min_version": TEXT, "max_version": TEXT}
    if mv is None or mv >= (1, 23):
        item["code"] = {"enum": CODES}
    optional = tuple(name for name in item if name not in ("status", "title", "detail"))
    return obj({"errors": {"type": "array", "minItems": 1, "maxItems": 1,
                           "items": obj(item, optional=optional)}})


# The auth layers' own 401 bodies (docs/design/placement-http.md#errors): noauth2's, and keystonemiddleware's.
NOAUTH_UNAUTHORIZED = obj({"message": TEXT, "code": TEXT, "title": TEXT})
KEYSTONE_UNAUTHORIZED = obj({"error": obj({"code": {"type": "integer"}, "title": TEXT, "message": TEXT})})


# --- the version document -------------------------------------------------------------

VERSIONS = obj({"versions": {"type": "array", "minItems": 1, "maxItems": 1, "items": obj({
    "id": {"const": "v1.0"}, "min_version": {"type": "string", "pattern": "^1\\.0$"},
    "max_version": {"type": "string", "pattern": "^1\\.[0-9]+$"}, "status": {"const": "CURRENT"},
    "links": {"type": "array", "items": obj({"rel": {"const": "self"}, "href": {"const": ""}})},
})}})


# --- resource providers ---------------------------------------------------------------

def provider(mv: Version) -> dict:
    rels = ["self", "inventories", "usages"]
    if mv >= (1, 1):
        rels.append("aggregates")
    if mv >= (1, 6):
        rels.append("traits")
    if mv >= (1, 11):
        rels.append("allocations")
    props = {"uuid": UUID, "name": {"type": "string", "maxLength": 200}, "generation": GENERATION,
             "links": links(*rels)}
    if mv >= (1, 14):
        props |= {"parent_provider_uuid": NULLABLE_UUID, "root_provider_uuid": UUID}
    return obj(props)


def providers(mv: Version) -> dict:
    return obj({"resource_providers": {"type": "array", "items": provider(mv)}})


# --- resource classes -----------------------------------------------------------------

RESOURCE_CLASS = obj({"name": {"type": "string", "pattern": RC_KEY, "maxLength": 255}, "links": links("self")})
RESOURCE_CLASSES = obj({"resource_classes": {"type": "array", "items": RESOURCE_CLASS}})


# --- inventories ----------------------------------------------------------------------

_POSITIVE = {"type": "integer", "minimum": 1, "maximum": MAX_INT}
INVENTORY_FIELDS = {
    "total": _POSITIVE,
    "reserved": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
    "min_unit": _POSITIVE,
    "max_unit": _POSITIVE,
    "step_size": _POSITIVE,
    "allocation_ratio": {"type": "number"},
}
INVENTORY = obj({**INVENTORY_FIELDS, "resource_provider_generation": GENERATION})
INVENTORIES = obj({"resource_provider_generation": GENERATION,
                   "inventories": keyed(RC_KEY, obj(INVENTORY_FIELDS))})
PROVIDER_USAGES = obj({"resource_provider_generation": GENERATION, "usages": USAGES})


# --- aggregates and traits ------------------------------------------------------------

def aggregates(mv: Version) -> dict:
    props = {"aggregates": {"type": "array", "items": TEXT, "uniqueItems": True}}
    if mv >= (1, 19):
        props["resource_provider_generation"] = GENERATION
    return obj(props)


TRAIT_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 255}, "uniqueItems": True}
TRAITS = obj({"traits": TRAIT_NAMES})
PROVIDER_TRAITS = obj({"traits": TRAIT_NAMES, "resource_provider_generation": GENERATION})


# --- allocations ----------------------------------------------------------------------

def consumer_allocations(mv: Version) -> dict:
    """``GET /allocations/{c}``: just ``{"allocations": {}}`` when there are none."""
    props = {"allocations": keyed(UUID_KEY, obj({"generation": GENERATION, "resources": AMOUNTS}),
                                  minProperties=1)}
    if mv >= (1, 12):
        props |= {"project_id": TEXT, "user_id": TEXT}
    if mv >= (1, 28):
        props["consumer_generation"] = GENERATION
    if mv >= (1, 38):
        props["consumer_type"] = {"type": "string", "minLength": 1}
    return {"anyOf": [obj({"allocations": {"type": "object", "maxProperties": 0}}), obj(props)]}


def provider_allocations(mv: Version) -> dict:
    entry = {"resources": AMOUNTS}
    if mv >= (1, 28):
        entry["consumer_generation"] = GENERATION
    return obj({"allocations": keyed(UUID_KEY, obj(entry)), "resource_provider_generation": GENERATION})


# --- usages ---------------------------------------------------------------------------

def project_usages(mv: Version) -> dict:
    if mv < (1, 38):
        return obj({"usages": USAGES})
    group = {"type": "object", "properties": {"consumer_count": {"type": "integer", "minimum": 1}},
             "required": ["consumer_count"], "patternProperties": {RC_KEY: COUNT},
             "additionalProperties": False}
    return obj({"usages": {"type": "object", "additionalProperties": group}})


# --- allocation candidates ------------------------------------------------------------

def _allocation_request(mv: Version) -> dict:
    if mv < (1, 12):
        item = obj({"resource_provider": obj({"uuid": UUID}), "resources": AMOUNTS})
        return obj({"allocations": {"type": "array", "minItems": 1, "items": item}})
    props = {"allocations": keyed(UUID_KEY, obj({"resources": AMOUNTS}), minProperties=1)}
    if mv >= (1, 34):
        # Keys are group suffixes ("" for the unsuffixed group).
        props["mappings"] = keyed("^[a-zA-Z0-9_-]{0,64}$", {"type": "array", "minItems": 1, "items": UUID})
    return obj(props)


def _summary(mv: Version) -> dict:
    props = {"resources": keyed(RC_KEY, obj({"capacity": COUNT, "used": COUNT}))}
    if mv >= (1, 17):
        props["traits"] = TRAIT_NAMES
    if mv >= (1, 29):
        props |= {"parent_provider_uuid": NULLABLE_UUID, "root_provider_uuid": UUID}
    return obj(props)


def allocation_candidates(mv: Version) -> dict | None:
    if mv < (1, 10):
        return None
    return obj({"allocation_requests": {"type": "array", "items": _allocation_request(mv)},
                "provider_summaries": keyed(UUID_KEY, _summary(mv))})


# --- operator endpoints ---------------------------------------------------------------

HEALTHY = obj({"status": {"const": "ok"}})
OPENAPI_DOCUMENT = {"type": "object", "required": ["openapi", "info", "paths"]}
