"""Building large answers relaxes the garbage collector but never stops it."""
import gc
import threading

from billeting.common import gcpause


def test_collection_stays_enabled_and_thresholds_come_back():
    before = gc.get_threshold()
    with gcpause.paused():
        assert gc.isenabled()
        assert gc.get_threshold()[0] >= gcpause.BUILD_THRESHOLD
        with gcpause.paused():  # nested (another thread's request) keeps it relaxed
            assert gc.get_threshold()[0] >= gcpause.BUILD_THRESHOLD
        assert gc.get_threshold()[0] >= gcpause.BUILD_THRESHOLD
    assert gc.get_threshold() == before


def test_overlapping_requests_from_threads_restore_the_threshold():
    before = gc.get_threshold()
    start = threading.Barrier(4)

    def build():
        start.wait()
        for _ in range(200):
            with gcpause.paused():
                [{"x": [i]} for i in range(50)]

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert gc.get_threshold() == before
    assert gc.isenabled()
