"""The purgatory (kcodec.broker.purgatory): an operation answered before its deadline lets
go of its keys and its timer entry at once. Left to the deadline, every answered Fetch
kept its request, closures and future alive for its max_wait_ms; at 1,000 fetches a
second the broker's young GC collections walked thousands of them, 10-20 ms each with
every connection paused."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from kcodec.broker.purgatory import Delayed, Purgatory, Timer


@pytest.fixture
def timer() -> Iterator[Timer]:
    t = Timer()
    yield t
    t.stop()


class _Op(Delayed):
    def __init__(self, ready: list[bool]) -> None:
        super().__init__()
        self.ready = ready
        self.expired = False

    def try_complete(self) -> bool:
        return self.complete("answered") if self.ready[0] else False

    def expire(self) -> None:
        self.expired = True
        self.complete("expired")


def test_an_operation_answered_early_is_freed_at_once(timer: Timer) -> None:
    p = Purgatory(timer)
    ready = [False]
    op = _Op(ready)
    ref = weakref.ref(op)
    fut = p.watch(op, [("t", 0), ("t", 1)], 30.0)
    assert p.size() == 1
    ready[0] = True
    p.notify(("t", 0))               # answers it; ("t", 1) is never notified
    assert fut.result(1) == "answered"
    del op
    gc.disable()                     # freed by its count, not by a collection
    try:
        assert ref() is None
    finally:
        gc.enable()
    assert p.size() == 0
    # the entry gone, or left until the thread wakes with its callback dropped
    assert all(e[2] is None for e in timer._heap)


def test_an_operation_left_to_its_deadline_expires(timer: Timer) -> None:
    p = Purgatory(timer)
    op = _Op([False])
    fut = p.watch(op, [("t", 0)], 0.05)
    assert fut.result(2) == "expired" and op.expired
    assert p.size() == 0


def test_a_cancelled_entry_does_not_run_and_others_do(timer: Timer) -> None:
    ran: list[str] = []
    done = threading.Event()
    a = timer.call_later(0.02, lambda: ran.append("a"))
    timer.call_later(0.04, lambda: (ran.append("b"), done.set()))
    Timer.cancel(a)
    assert done.wait(2)
    time.sleep(0.02)
    assert ran == ["b"]


def test_an_operation_answered_while_it_is_being_watched(timer: Timer) -> None:
    """Answered between the watch's registration and its timer (another thread's notify):
    its hook runs at once, so nothing of it stays."""
    p = Purgatory(timer)
    op = _Op([False])
    op.complete("elsewhere")
    fut = p.watch(op, [("t", 0)], 30.0)
    assert fut.result(1) == "elsewhere"
    assert p.size() == 0
    assert all(e[2] is None for e in timer._heap)


def test_an_earlier_deadline_set_later_runs_on_time(timer: Timer) -> None:
    """The thread is woken only when an entry becomes the earliest; it must be then."""
    ran = threading.Event()
    timer.call_later(30.0, lambda: None)
    time.sleep(0.02)                 # the thread waits for the 30 s entry
    t0 = time.monotonic()
    timer.call_later(0.05, ran.set)
    assert ran.wait(5)
    assert time.monotonic() - t0 < 1.0


def test_cancelled_entries_before_a_live_one_do_not_hold_it_up(timer: Timer) -> None:
    ran = threading.Event()
    gone = [timer.call_later(0.01 * i, lambda: None) for i in range(1, 50)]
    timer.call_later(0.1, ran.set)
    for e in gone:
        Timer.cancel(e)
    assert ran.wait(5)
    time.sleep(0.05)
    assert timer._heap == []
