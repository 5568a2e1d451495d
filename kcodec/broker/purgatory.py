"""Delayed operations: answers that wait for an event or a deadline (Kafka's purgatory).

A :class:`Delayed` operation has a ``future``; ``try_complete()`` answers it when it can
(returns True), ``expire()`` answers it at the deadline. Operations watch keys (a partition,
a group); ``notify(key)`` retries the operations watching it. One timer thread fires the
deadlines, also used for periodic work (session timeouts, retention).

An operation answered before its deadline lets go of its keys and cancels its timer entry
at once, as Kafka's purgatory cancels the timer task of a completed operation. Left to its
deadline (a Fetch's ``max_wait_ms``, 500 ms by default), every answered Fetch kept its
request, its closures and its future alive: at 1,000 fetches a second, thousands of
objects that only the cyclic GC walked, each young collection 10-20 ms with every
connection of the broker paused.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["Delayed", "Purgatory", "Timer"]

log = logging.getLogger(__name__)


class Timer:
    """One thread running callbacks at their deadlines (monotonic seconds)."""

    def __init__(self, name: str = "kcodec-broker-timer") -> None:
        self._heap: list[list] = []     # [deadline, seq, callback or None]
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_at(self, deadline: float, fn: Callable[[], Any]) -> list:
        """Run ``fn`` at ``deadline``; the entry returned is what ``cancel`` takes."""
        entry = [deadline, next(self._seq), fn]
        with self._cond:
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:   # only an earlier deadline changes the thread's wait
                self._cond.notify()
        return entry

    def call_later(self, delay_s: float, fn: Callable[[], Any]) -> list:
        return self.call_at(time.monotonic() + delay_s, fn)

    @staticmethod
    def cancel(entry: list) -> None:
        """Do not run the entry's callback, and let go of it now (the entry itself leaves
        the heap when the thread next wakes, without a wake-up of its own). A callback
        already taken from the heap still runs."""
        entry[2] = None

    def every(self, period_s: float, fn: Callable[[], Any]) -> None:
        def tick() -> None:
            try:
                fn()
            finally:
                if not self._stopped:
                    self.call_later(period_s, tick)
        self.call_later(period_s, tick)

    def _run(self) -> None:
        while True:
            with self._cond:
                heap = self._heap
                while True:
                    # cancelled entries go without a wake-up for their deadline: nearly
                    # every Fetch's expiry is cancelled within milliseconds of being set
                    while heap and heap[0][2] is None:
                        heapq.heappop(heap)
                    if self._stopped or (heap and heap[0][0] <= time.monotonic()):
                        break
                    self._cond.wait(heap[0][0] - time.monotonic() if heap else None)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(heap)
            if fn is None:      # cancelled
                continue
            try:
                fn()
            except Exception:
                log.exception("kcodec broker: a timed task failed")

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(5)


class Delayed:
    """An answer that is not ready yet. Subclasses define ``try_complete`` and ``expire``."""

    def __init__(self) -> None:
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self._lock = threading.Lock()
        self.done = False
        self._on_done: Callable[[], Any] | None = None

    def complete(self, answer: Any) -> bool:
        """Answer once; later calls do nothing. True if this call answered."""
        with self._lock:
            if self.done:
                return False
            self.done = True
            then, self._on_done = self._on_done, None
        self.future.set_result(answer)
        if then is not None:
            then()
        return True

    def on_done(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` once this operation is answered (now, if it is already)."""
        with self._lock:
            if not self.done:
                self._on_done = fn
                return
        fn()

    def try_complete(self) -> bool:   # pragma: no cover - abstract
        raise NotImplementedError

    def expire(self) -> None:   # pragma: no cover - abstract
        raise NotImplementedError


class Purgatory:
    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self._watchers: dict[Hashable, list[Delayed]] = defaultdict(list)
        self._lock = threading.Lock()

    def watch(self, op: Delayed, keys: list[Hashable], timeout_s: float) -> concurrent.futures.Future:
        """Park ``op`` until a notify on one of ``keys`` completes it, or the timeout."""
        with self._lock:
            for k in keys:
                self._watchers[k].append(op)
        # an event may have happened between the caller's check and the watch
        if op.try_complete():
            self._forget(op, keys)
            return op.future
        entry = self.timer.call_later(timeout_s, lambda: self._expire(op, keys))

        def answered() -> None:     # before the deadline: its keys and its timer go now
            Timer.cancel(entry)
            self._forget(op, keys)
        op.on_done(answered)
        return op.future

    def _expire(self, op: Delayed, keys: list[Hashable]) -> None:
        if not op.done:
            op.expire()
        self._forget(op, keys)

    def _forget(self, op: Delayed, keys: list[Hashable]) -> None:
        with self._lock:
            for k in keys:
                ops = self._watchers.get(k)
                if ops is not None:
                    try:
                        ops.remove(op)
                    except ValueError:
                        pass
                    if not ops:
                        del self._watchers[k]

    def size(self) -> int:
        """Operations waiting (each counted once, whatever keys it watches)."""
        with self._lock:
            return len({id(op) for ops in self._watchers.values() for op in ops})

    def notify(self, key: Hashable) -> None:
        with self._lock:
            ops = list(self._watchers.get(key, ()))
        for op in ops:
            if not op.done and op.try_complete():
                pass
        if ops:
            with self._lock:
                live = [o for o in self._watchers.get(key, ()) if not o.done]
                if live:
                    self._watchers[key] = live
                else:
                    self._watchers.pop(key, None)
