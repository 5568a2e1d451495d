"""The compiled accumulator's shortcuts, against the pure twin and against threading.Lock.

The per-record step makes its future without calling the class and stores its two slots in
place, reads a batch's ``builder`` and ``timestamps`` slots in place, reuses index and
timestamp ints, and takes its own lock from C. Each shortcut must give what the plain Python
path gives for any future or batch class, keep reference counts exact, and the lock must
behave as ``threading.Lock`` for the Python code (``with acc.lock``, ``threading.Condition``)
that shares it with the C step."""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time
from typing import Any

import pytest

SEAL = 1 << 20


class SlotBatch:
    __slots__ = ("builder", "timestamps", "sequence", "size")

    def __init__(self, builder: Any) -> None:
        self.builder, self.timestamps, self.sequence, self.size = builder, [], -1, 0


class OtherSlotBatch:            # the same fields at other offsets
    __slots__ = ("a", "b", "c", "timestamps", "size", "sequence", "builder")

    def __init__(self, builder: Any) -> None:
        self.a = self.b = self.c = None
        self.builder, self.timestamps, self.sequence, self.size = builder, [], -1, 0


class DictBatch:                 # no slots: attributes in a __dict__
    def __init__(self, builder: Any) -> None:
        self.builder, self.timestamps, self.sequence, self.size = builder, [], -1, 0


class PropBatch(SlotBatch):      # a subclass whose builder is a property over a slot
    __slots__ = ("_b",)

    def __init__(self, builder: Any) -> None:
        super().__init__(None)
        self._b = builder

    @property                    # type: ignore[override]
    def builder(self) -> Any:
        return self._b

    @builder.setter
    def builder(self, v: Any) -> None:
        self._b = v


class SlotFuture:
    __slots__ = ("batch", "index")


class InitFuture:
    __slots__ = ("batch", "index", "made")

    def __init__(self) -> None:
        self.made = True


class DictFuture:
    pass


class _Counting(type):
    made = 0

    def __call__(cls, *args: Any) -> Any:
        _Counting.made += 1
        return super().__call__(*args)


class MetaFuture(metaclass=_Counting):   # calling the class does more than allocate
    __slots__ = ("batch", "index")


class PropFuture:
    __slots__ = ("_i", "batch")

    @property
    def index(self) -> int:
        return self._i

    @index.setter
    def index(self, v: int) -> None:
        self._i = v * 10


def _feed(accum: Any, builder_mod: Any, future: type, batches: list[type],
          clock: bool) -> list[Any]:
    """Records into batches of each class in turn; with ``clock``, every other record takes
    the clock's time (then the batch bytes differ between runs and are not kept)."""
    eng = accum.Accumulator(SEAL, 1 << 30, lambda: None)
    eng.counts = {"t": 1}
    eng.bind(future)
    out: list[Any] = []
    kept = []
    for n, cls in enumerate(batches * 3):
        b = eng.open[("t", 0)] = cls(builder_mod.RecordBatchBuilder(max_size=SEAL))
        for i in range(300):
            f = eng.keyed("t", b"k", b"v%d" % i, None,
                          None if clock and i % 2 else 1000 + n)
            assert f.batch is b
            out.append((type(f).__name__, f.index, getattr(f, "made", None)))
            if i % 50 == 0:
                kept.append(f)
        out.append((len(b.timestamps), [t for t in b.timestamps if t < 10_000]))
        stamps = [t for t in b.timestamps if t >= 10_000]
        assert stamps == sorted(stamps)
        if clock:
            assert len(stamps) == 150 and stamps[0] > 1_600_000_000_000
        else:
            out.append(b.builder.build())
    scale = 10 if future is PropFuture else 1
    out.append([(f.index, f.batch.timestamps[f.index // scale] < 10_000) for f in kept])
    return out


@pytest.mark.parametrize("clock", [False, True])
@pytest.mark.parametrize("future", [SlotFuture, InitFuture, DictFuture, PropFuture,
                                    MetaFuture])
def test_any_future_and_batch_class_gives_the_pure_twins_results(pair, future, clock) -> None:
    batches = [SlotBatch, OtherSlotBatch, DictBatch, PropBatch, SlotBatch]
    _Counting.made = 0
    got = [_feed(a, b, future, batches, clock)
           for a, b in zip(pair("accum"), pair("builder"), strict=False)]
    assert got[0] == got[1]
    if future is PropFuture:
        assert got[0][1][1] == 10          # the property's setter ran
    if future is InitFuture:
        assert got[0][0][2] is True        # __init__ ran
    if future is MetaFuture:
        assert _Counting.made == 2 * 15 * 300   # the metaclass's __call__, both twins


def test_reference_counts_are_exact(pair) -> None:
    accum, builder = pair("accum")[0], pair("builder")[0]
    eng = accum.Accumulator(SEAL, 1 << 30, lambda: None)
    eng.counts = {"t": 1}
    eng.bind(SlotFuture)
    b = eng.open[("t", 0)] = SlotBatch(builder.RecordBatchBuilder(max_size=SEAL))
    eng.keyed("t", b"k", b"v", None, None)
    gc.collect()
    before, ts_before = sys.getrefcount(b), sys.getrefcount(b.timestamps)
    futs = [eng.keyed("t", b"k", b"v", None, None) for _ in range(70_000)]
    assert sys.getrefcount(b) == before + len(futs)
    assert [f.index for f in futs[:3]] == [1, 2, 3] and futs[-1].index == 70_000
    assert all(gc.is_tracked(f) for f in futs[:10])
    assert b in gc.get_referents(futs[0])
    i = futs[5].index
    del futs
    gc.collect()
    after, ts_after = sys.getrefcount(b), sys.getrefcount(b.timestamps)
    assert (after, ts_after) == (before, ts_before)
    assert i == 6


# -- the lock -------------------------------------------------------------------------------

def _locks(pair) -> list[Any]:
    """The compiled accumulator's lock and threading.Lock (the pure twin's)."""
    cy = pair("accum")[0]
    return [cy.Accumulator(1, 1, lambda: None).lock, threading.Lock()]


def _semantics(lock: Any) -> list[Any]:
    out: list[Any] = [lock.locked(), lock.acquire(), lock.locked(), lock.acquire(False)]
    t = time.monotonic()
    out.append(lock.acquire(timeout=0.1))
    out.append(time.monotonic() - t >= 0.09)
    out.append(lock.acquire(True, 0))
    for bad in ({"blocking": False, "timeout": 1}, {"timeout": -2}):
        with pytest.raises(ValueError) as info:
            lock.acquire(**bad)
        out.append(str(info.value))
    lock.release()
    with pytest.raises(RuntimeError) as info:
        lock.release()
    out.append(str(info.value))
    with lock:
        out.append(lock.locked())
    out.append(lock.locked())
    # released by another thread than the one that took it
    lock.acquire()
    threading.Thread(target=lock.release).start()
    out.append(lock.acquire(timeout=5))
    lock.release()
    return out


def test_the_lock_behaves_as_threading_lock(pair) -> None:
    mine, theirs = _locks(pair)
    assert _semantics(mine) == _semantics(theirs)


def test_condition_and_contention_with_the_c_step(pair) -> None:
    """Python threads take the lock (with, Condition) while the main thread sends through
    the C step: every increment and every record counted, a notify reaches the waiter."""
    accum, builder = pair("accum")[0], pair("builder")[0]
    eng = accum.Accumulator(SEAL, 1 << 30, lambda: None)
    eng.counts = {"t": 1}
    eng.bind(SlotFuture)
    cond = threading.Condition(eng.lock)
    state = {"n": 0, "go": False}
    woke: list[bool] = []

    def bump() -> None:
        for _ in range(20_000):
            with eng.lock:
                state["n"] += 1

    def waiter() -> None:
        with cond:
            woke.append(cond.wait_for(lambda: state["go"], timeout=20))

    threads = [threading.Thread(target=bump) for _ in range(3)] + [threading.Thread(
        target=waiter)]
    for t in threads:
        t.start()
    sent = 0
    for _ in range(40):
        b = eng.open[("t", 0)] = SlotBatch(builder.RecordBatchBuilder(max_size=SEAL))
        for _ in range(500):
            assert eng.keyed("t", b"k", b"v", None, 1) is not None
        sent += len(b.timestamps)
    with cond:
        state["go"] = True
        cond.notify_all()
    for t in threads:
        t.join(20)
    assert state["n"] == 60_000 and woke == [True] and sent == 20_000
    assert not eng.lock.locked()


def test_a_python_holder_holds_off_the_c_step(pair) -> None:
    accum, builder = pair("accum")[0], pair("builder")[0]
    eng = accum.Accumulator(SEAL, 1 << 30, lambda: None)
    eng.counts = {"t": 1}
    eng.bind(SlotFuture)
    b = eng.open[("t", 0)] = SlotBatch(builder.RecordBatchBuilder(max_size=SEAL))
    held, order = threading.Event(), []

    def hold() -> None:
        with eng.lock:
            held.set()
            time.sleep(0.3)
            order.append("released")

    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(10)
    eng.keyed("t", b"k", b"v", None, 1)
    order.append("sent")
    t.join(10)
    assert order == ["released", "sent"] and len(b.timestamps) == 1


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")
def test_a_signal_handler_interrupts_a_waiting_acquire(pair) -> None:
    for lock in _locks(pair):
        lock.acquire()

        class Alarm(Exception):
            pass

        def ring(*_: Any) -> None:
            raise Alarm

        old = signal.signal(signal.SIGALRM, ring)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            t = time.monotonic()
            with pytest.raises(Alarm):
                lock.acquire(timeout=10)
            assert time.monotonic() - t < 5
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        lock.release()
