"""The ``name`` filter of server listings: a client's regular expression,
evaluated within a time budget.

Nova treats ``?name=`` as a regular expression. A backtracking engine can
take exponential time on a hostile one (``(a|aa)+$`` against a name of forty
``a`` and one ``!`` runs for hours), and any tenant may name its own servers
so: one request would hold a worker thread for good. The ``regex`` library
matches with a timeout; the matches of one listing share one budget (the
time spent matching, not building the listing), and a pattern that exhausts
it is refused with a 400 rather than answered late.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import regex

from billeting.api.compute.errors import bad_request

# For every name of one listing together: far above what any sensible
# pattern needs for thousands of names, far below a client's patience.
BUDGET_S = 0.5


def matcher(pattern: str, budget_s: float = BUDGET_S) -> Callable[[str], bool]:
    """``name -> does the pattern match somewhere in it`` (``re.search``
    semantics); raises a 400 for a pattern that does not compile, and from
    the returned function once the listing's budget is spent."""
    try:
        compiled = regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError):
        raise bad_request(f"Invalid regular expression for name: {pattern}") from None
    spent = 0.0  # matching time only: the listing builds bodies in between

    def matches(name: str) -> bool:
        nonlocal spent
        left = budget_s - spent
        started = time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return compiled.search(name, timeout=left) is not None
        except TimeoutError:
            raise bad_request(f"The regular expression for name took too long to evaluate "
                              f"(over {budget_s:g} s for this listing); simplify it: {pattern}") from None
        finally:
            spent += time.monotonic() - started

    return matches
