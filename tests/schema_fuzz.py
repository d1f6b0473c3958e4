"""The loop the schema-driven fuzz tests share: every operation of a
schemathesis schema, its path parameters drawn mostly from a seeded set of
names (random ones only find 404s), each case sent through the app and
checked; the first failure of each operation is kept and all are reported
together at the end (one failing operation does not hide the others).
Bodies the generator would seldom hit (ones that pass validation and reach
the domain code) can be given per operation, and a ``Tally`` counts the
examples and the statuses each operation answered."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.core.failures import FailureGroup


class Tally:
    """What a run did: examples sent, and per operation the statuses answered."""

    def __init__(self) -> None:
        self.examples = 0
        self.statuses: dict[str, Counter] = {}

    def add(self, label: str, status: int) -> None:
        self.examples += 1
        self.statuses.setdefault(label, Counter())[status] += 1

    def answered(self, label: str, status: int) -> bool:
        return self.statuses.get(label, Counter())[status] > 0


def fuzz_every_operation(schema, *, path_values: dict, examples: int,
                         variant: st.SearchStrategy, prepare: Callable, checks: list,
                         check: Callable, order: Callable | None = None,
                         bodies: dict[str, list] | None = None, tally: Tally | None = None) -> dict[str, str]:
    """``prepare(case, variant_value)`` sets the headers of a case; ``check(response)``
    asserts what schemathesis's ``checks`` do not; ``path_values`` maps a path
    parameter's name, or (path, name) for one path, to the values to draw from;
    ``bodies`` maps an operation's
    label to bodies sent besides the generated ones. Returns operation label -> failure."""
    failures: dict[str, str] = {}
    tally = tally if tally is not None else Tally()
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in sorted(operations, key=order) if order else operations:
        names = [p.name for p in operation.path_parameters]
        strategy = operation.as_strategy()
        if names:
            # A pool for this path's parameter, (path, name), before the one for every path's.
            pools = {n: path_values.get((operation.path, n), path_values.get(n)) for n in names}
            seeded = st.fixed_dictionaries({n: st.sampled_from(pools[n]) for n in names}).flatmap(
                lambda params, op=operation: op.as_strategy(path_parameters=params))
            strategy = st.one_of(strategy, seeded, seeded)
        given_bodies = (bodies or {}).get(operation.label, [])
        if given_bodies:
            strategy = st.one_of(strategy, *[operation.as_strategy(body=b) for b in given_bodies] * 2)

        label = operation.label

        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=strategy, value=variant)
        def run(case, value):
            prepare(case, value)
            response = case.call()
            tally.add(label, response.status_code)
            try:
                case.validate_response(response, checks=checks)
                check(response)
            except (AssertionError, FailureGroup) as exc:  # one failed check, or several at once
                failures.setdefault(label, f"{case.method} {case.formatted_path} {case.query!r:.200} "
                                           f"{case.body!r:.300}: {exc}"[:2000])

        run()
    return failures
