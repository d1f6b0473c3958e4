"""The cell conductor's short memory of hosts that just failed a build."""
from __future__ import annotations

import threading

import pytest

from billeting.conductor.recent_failures import RecentFailures


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_host_is_remembered_for_the_window_after_its_last_failure():
    clock = Clock()
    memory = RecentFailures(window_s=10, clock=clock)
    memory.failed("a")
    clock.now = 6
    memory.failed("b")
    assert memory.hosts() == {"a", "b"}
    clock.now = 10.5
    assert memory.hosts() == {"b"}            # a's failure is 10.5 s old
    memory.failed("a")                         # fails again: remembered afresh
    clock.now = 16.5
    assert memory.hosts() == {"a"}
    clock.now = 30
    assert memory.hosts() == frozenset() and len(memory) == 0


def test_the_memory_is_bounded_and_forgets_the_oldest_first():
    memory = RecentFailures(window_s=60, max_hosts=3, clock=Clock())
    for host in ("a", "b", "c", "a", "d"):
        memory.failed(host)
    assert memory.hosts() == {"c", "a", "d"}   # b was the oldest once a failed again


def test_a_zero_window_remembers_nothing_and_bad_settings_are_refused():
    memory = RecentFailures(window_s=0)
    memory.failed("a")
    memory.failed(None)
    assert memory.hosts() == frozenset()
    with pytest.raises(ValueError):
        RecentFailures(window_s=-1)
    with pytest.raises(ValueError):
        RecentFailures(max_hosts=0)


def test_many_threads_recording_at_once_keep_the_bound():
    memory = RecentFailures(window_s=60, max_hosts=50)
    threads = [threading.Thread(target=lambda n=n: [memory.failed(f"h{n}-{i}") for i in range(200)])
               for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(memory.hosts()) == 50
