"""The compiled yes/no body check never accepts what jsonschema refuses.

Every request-body schema of the API, at every microversion, is compiled
and then fed valid bodies and many random mutations of them; whenever the
fast check says yes, the strict validator must agree. The valid bodies must
pass the fast check too, or the fast path would never be taken.
"""
from __future__ import annotations

import copy
import random
import uuid

import pytest

from billeting.common.http import fastcheck
from billeting.common.http import util
from billeting.placement.api.schemas import aggregates, allocations, inventories, reshaper
from billeting.placement.api.schemas import resource_classes, resource_providers, traits

VERSIONS = [(1, minor) for minor in range(0, 40)]
RP = str(uuid.uuid4())
CONSUMER = str(uuid.uuid4())


def _all_schemas() -> list[tuple[str, dict]]:
    found: dict[bytes, tuple[str, dict]] = {}

    def add(name: str, schema: dict) -> None:
        import orjson
        found.setdefault(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS), (name, schema))

    for name in ("RECORD", "POST", "PUT_ONE", "PUT_ALL"):
        add(f"inventories.{name}", getattr(inventories, name))
    add("traits.PROVIDER_TRAITS", traits.PROVIDER_TRAITS)
    add("resource_classes.BODY", resource_classes.BODY)
    for mv in VERSIONS:
        add(f"aggregates.put{mv}", aggregates.put(mv))
        add(f"allocations.put{mv}", allocations.put(mv))
        add(f"resource_providers.create{mv}", resource_providers.create(mv))
        add(f"resource_providers.update{mv}", resource_providers.update(mv))
        if mv >= (1, 13):
            add(f"allocations.post{mv}", allocations.post(mv))
        if mv >= (1, 30):
            add(f"reshaper.body{mv}", reshaper.body(mv))
    return list(found.values())


SCHEMAS = _all_schemas()

_RECORD = {"total": 8, "reserved": 1, "min_unit": 1, "max_unit": 8, "step_size": 1,
           "allocation_ratio": 1.5}


def _entry(mv) -> dict:
    entry = {"allocations": {RP: {"resources": {"VCPU": 1, "MEMORY_MB": 256}, "generation": 3}},
             "project_id": "p", "user_id": "u"}
    if mv >= (1, 28):
        entry["consumer_generation"] = None
    if mv >= (1, 34):
        entry["mappings"] = {"_A": [RP]}
    if mv >= (1, 38):
        entry["consumer_type"] = "INSTANCE"
    return entry


def _seeds(name: str) -> list:
    """Bodies each schema family accepts (the first microversion-specific ones
    are worked out from the name)."""
    mv = eval(name[name.index("("):]) if "(" in name else (1, 39)  # noqa: S307 - our own names
    family = name.split("(")[0]
    return {
        "inventories.RECORD": [dict(_RECORD), {"total": 1}],
        "inventories.POST": [{**_RECORD, "resource_class": "VCPU"}],
        "inventories.PUT_ONE": [{**_RECORD, "resource_provider_generation": 0}],
        "inventories.PUT_ALL": [{"resource_provider_generation": 2,
                                 "inventories": {"VCPU": dict(_RECORD), "DISK_GB": {"total": 5}}}],
        "traits.PROVIDER_TRAITS": [{"traits": ["HW_CPU_X86_AVX2", "CUSTOM_A"],
                                    "resource_provider_generation": 1}],
        "resource_classes.BODY": [{"name": "CUSTOM_FOO"}],
        "aggregates.put": [{"aggregates": [RP, CONSUMER], "resource_provider_generation": 1}
                           if mv >= (1, 19) else [RP, CONSUMER]],
        "allocations.put": [{"allocations": [{"resource_provider": {"uuid": RP},
                                              "resources": {"VCPU": 1}}],
                             **({"project_id": "p", "user_id": "u"} if mv >= (1, 8) else {})}
                            if mv < (1, 12) else _entry(mv)],
        "allocations.post": [{CONSUMER: _entry(mv)}],
        "resource_providers.create": [{"name": "n", "uuid": RP},
                                      *([{"name": "n", "parent_provider_uuid": None}]
                                        if mv >= (1, 14) else [])],
        "resource_providers.update": [{"name": "n"}],
        "reshaper.body": [{"inventories": {RP: {"resource_provider_generation": 1,
                                                "inventories": {"VCPU": dict(_RECORD)}}},
                           "allocations": {CONSUMER: _entry(mv)}}],
    }[family]


_ODD_VALUES = [None, True, False, 0, 1, -1, 1.0, 1.5, 2**31, 2**40, "", "x", "VCPU", "vcpu",
               "VCPU\n", "CUSTOM_A", "\x00", "a" * 256, RP, RP + "\n", RP.upper(), RP.replace("-", ""),
               "urn:uuid:" + RP, [], [1], ["a", "a"], [RP], {}, {"total": 1}, {"VCPU": 1},
               {"resources": {"VCPU": 1}}, 3.5e38, -0.0]


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _paths(sub, (*prefix, index))


def _mutate(body, rng: random.Random):
    body = copy.deepcopy(body)
    path = rng.choice(list(_paths(body)))
    if not path:
        return rng.choice(_ODD_VALUES)
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = rng.random()
    if action < 0.5:
        parent[last] = copy.deepcopy(rng.choice(_ODD_VALUES))
    elif action < 0.7 and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent, dict):
        parent[rng.choice(["extra", "VCPU", "DISK_GB", RP, "generation", "total", "x\n",
                           "resource_provider_generation", "consumer_type"])] = copy.deepcopy(
            rng.choice(_ODD_VALUES))
    else:
        parent.append(copy.deepcopy(rng.choice(_ODD_VALUES)))
    return body


@pytest.mark.parametrize("name,schema", SCHEMAS, ids=[name for name, _ in SCHEMAS])
def test_fast_check_never_accepts_what_jsonschema_refuses(name, schema):
    checker = util._checker_for(schema)
    assert checker.fast is not None, "every body schema of the API compiles"
    rng = random.Random(name)
    seeds = _seeds(name)
    for seed in seeds:
        assert checker.strict.is_valid(seed), seed
        assert checker.fast(seed), seed
    agreed = 0
    for _ in range(400):
        body = _mutate(rng.choice(seeds), rng)
        if rng.random() < 0.3:
            body = _mutate(body, rng)
        strict = checker.strict.is_valid(body)
        fast = checker.fast(body)
        assert strict or not fast, f"fast check accepted {body!r}"
        agreed += strict == fast
    # Saying "no" when in doubt is allowed, but should be rare.
    assert agreed >= 390


def test_unknown_keywords_are_left_to_jsonschema():
    assert fastcheck.compile_schema({"type": "object", "dependencies": {}},
                                    pattern=util._pattern_matcher, formats={}) is None
    assert fastcheck.compile_schema({"type": "string", "format": "date-time"},
                                    pattern=util._pattern_matcher, formats={}) is None
    assert fastcheck.compile_schema({"items": [{"type": "string"}]},
                                    pattern=util._pattern_matcher, formats={}) is None


def test_error_texts_still_come_from_jsonschema():
    with pytest.raises(util.HTTPProblem) as caught:
        util.validate({"total": 0}, inventories.RECORD)
    assert caught.value.detail.startswith("JSON does not validate: 0 is less than the minimum of 1\n")
