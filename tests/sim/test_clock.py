"""The virtual clock: event order, ties, and tasks that interleave."""
from billeting.sim.clock import Clock, Semaphore


def test_events_run_in_time_order_and_ties_in_scheduling_order():
    clock = Clock()
    seen = []
    clock.call_at(2.0, seen.append, "b")
    clock.call_at(1.0, seen.append, "a")
    clock.call_at(2.0, seen.append, "c")   # same instant as "b", scheduled later
    clock.call_at(0.5, seen.append, "first")
    clock.run()
    assert seen == ["first", "a", "b", "c"]
    assert clock.now == 2.0


def test_tasks_interleave_while_they_sleep():
    clock = Clock()
    log = []

    def worker(name, step):
        for i in range(3):
            log.append((clock.now, name, i))
            clock.sleep(step)

    clock.call_at(0.0, lambda: (clock.spawn(worker, "slow", 1.0), clock.spawn(worker, "fast", 0.4)))
    clock.run()
    assert log == [(0.0, "slow", 0), (0.0, "fast", 0), (0.4, "fast", 1), (0.8, "fast", 2),
                   (1.0, "slow", 1), (2.0, "slow", 2)]


def test_a_task_does_not_see_time_pass_while_it_computes():
    clock = Clock()
    stamps = []

    def task():
        stamps.append(clock.now)
        sum(range(10000))   # real work takes no virtual time
        stamps.append(clock.now)
        clock.sleep(0.25)
        stamps.append(clock.now)

    clock.call_at(3.0, lambda: clock.spawn(task))
    clock.run()
    assert stamps == [3.0, 3.0, 3.25]


def test_suspended_real_time_is_tracked_per_task():
    clock = Clock()
    tasks = []

    def sleeper():
        clock.sleep(1.0)

    def busy():
        sum(range(200000))

    def start():
        tasks.append(clock.spawn(sleeper))
        clock.spawn(busy, delay=0.5)
    clock.call_at(0.0, start)
    clock.run()
    assert tasks[0].suspended_s > 0   # it was switched out while "busy" ran


def test_stop_ends_the_run_and_drops_what_is_left():
    clock = Clock()
    seen = []
    clock.call_at(1.0, clock.stop)
    clock.call_at(2.0, seen.append, "never")
    clock.run()
    assert seen == [] and clock.now == 1.0


def test_semaphore_limits_holders_and_serves_waiters_in_order():
    clock = Clock()
    sem = Semaphore(clock, 2)
    log = []

    def job(name):
        sem.acquire()
        log.append((clock.now, name, "in"))
        clock.sleep(1.0)
        sem.release()

    def start():
        for name in "abcd":
            clock.spawn(job, name)
    clock.call_at(0.0, start)
    clock.run()
    assert log == [(0.0, "a", "in"), (0.0, "b", "in"), (1.0, "c", "in"), (1.0, "d", "in")]
