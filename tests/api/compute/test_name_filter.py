"""The server list's ``name`` regex and its time budget."""
from __future__ import annotations

import time

import pytest

from billeting.api.compute import name_filter
from billeting.api.compute.errors import NovaError


def test_the_budget_counts_matching_only():
    matches = name_filter.matcher(r"^web-\d+$", budget_s=0.05)
    for _ in range(3):
        time.sleep(0.03)  # building the listing's bodies between matches
        assert matches("web-12")
    assert not matches("db-1")


def test_a_backtracking_pattern_is_a_400_once_the_budget_is_spent():
    matches = name_filter.matcher(r"(a|aa)+$", budget_s=0.05)
    started = time.monotonic()
    with pytest.raises(NovaError) as raised:
        matches("a" * 40 + "!")
    assert raised.value.status == 400 and "took too long" in raised.value.message
    assert time.monotonic() - started < 5


def test_a_pattern_that_does_not_compile_is_a_400():
    with pytest.raises(NovaError) as raised:
        name_filter.matcher("(unclosed")
    assert raised.value.status == 400
