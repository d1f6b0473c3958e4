"""The loop the schema-driven fuzz tests share: every operation of a
schemathesis schema, its path parameters drawn mostly from a seeded set of
names (random ones only find 404s), each case sent through the app and
checked; the first failure of each operation is kept and all are reported
together at the end (one failing operation does not hide the others)."""
from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st


def fuzz_every_operation(schema, *, path_values: dict[str, list[str]], examples: int,
                         variant: st.SearchStrategy, prepare: Callable, checks: list,
                         check: Callable, order: Callable | None = None) -> dict[str, str]:
    """``prepare(case, variant_value)`` sets the headers of a case; ``check(response)``
    asserts what schemathesis's ``checks`` do not. Returns operation label -> failure."""
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in sorted(operations, key=order) if order else operations:
        names = [p.name for p in operation.path_parameters]
        strategy = operation.as_strategy()
        if names:
            seeded = st.fixed_dictionaries({n: st.sampled_from(path_values[n]) for n in names}).flatmap(
                lambda params, op=operation: op.as_strategy(path_parameters=params))
            strategy = st.one_of(strategy, seeded, seeded)

        label = operation.label

        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=strategy, value=variant)
        def run(case, value):
            prepare(case, value)
            response = case.call()
            try:
                case.validate_response(response, checks=checks)
                check(response)
            except AssertionError as exc:
                failures.setdefault(label, f"{case.method} {case.formatted_path} {case.query!r:.200} "
                                           f"{case.body!r:.300}: {exc}"[:2000])

        run()
    return failures
