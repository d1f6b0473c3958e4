"""Waiting for a condition another thread or process brings about."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str = "condition", *, timeout: float = 20.0,
             interval: float = 0.05) -> T:
    """``predicate()``'s first truthy value, asked every ``interval`` seconds;
    fails the test, naming ``what``, when ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
