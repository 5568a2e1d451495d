"""The producer's record accumulator: the state it owns, and the per-record step for a
record whose partition the key chooses (the reference twin of kcodec._cy.accum).

    a = Accumulator(seal_size, buffer_memory, wake)
    a.bind(future_type, slow)             # what ``keyed`` makes; ``send``'s general path
    a.keyed(topic, key, value, headers, timestamp) -> future | None
    a.send(topic, value=None, key=None, partition=None, headers=None, timestamp=None)
    a.seal(tp, batch)      a.account(batch)           (with ``a.lock`` held)

State, all the accumulator's own: ``lock`` (a ``threading.Lock``; the compiled twin's is
its own ``Lock`` with the same methods, which its per-record step takes from C); ``open``
((topic, partition) -> the batch being filled); ``queues`` ((topic, partition) -> deque of
sealed batches, oldest first); ``next_seq`` ((topic, partition) -> the next batch's base
sequence); ``counts`` (topic -> partition count, for choosing a partition without the
loop); ``pending`` and ``buffered`` (records and bytes of sealed batches not yet
acknowledged: an open batch is counted when it is sealed, not per record); ``closed`` and
``fatal`` (an error that stops the producer, or None). ``wake()`` tells the sender there is
something to send.

A batch is any object with ``builder`` (a RecordBatchBuilder, or None once built),
``timestamps`` (one per record: its count), ``sequence`` and ``size``
(kcodec.client.producer.batch.ProducerBatch).

``keyed`` takes a record with a bytes key and no chosen partition: its value bytes or None,
its topic's partition count known, ``buffered`` not above ``buffer_memory``; the partition
is the key's murmur2 (kcodec.client.producer.partitioner.partition_for_key). Then, under
``lock``: the partition's open batch takes the record through its builder's ``add`` (the
timestamp goes on ``batch.timestamps``); a batch whose builder reaches ``seal_size`` bytes
is sealed and ``wake()`` called. The result is ``future_type()`` (a class without
``__init__``) with ``batch`` and ``index`` set, or None when the producer must take the
record itself: closed or failed, no open batch, or the open batch full. An error in the
record (``add``'s) propagates with the lock released and nothing added.

``send`` has ``Producer.send``'s signature and is bound as the producer instance's ``send``
(one call per record, no Python frame of the producer's in between): ``keyed`` when no
partition is given, else (or when ``keyed`` returns None) ``slow`` with the same arguments
(the producer's general path).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from kcodec._py.murmur import partition_for_key

__all__ = ["Accumulator"]

_HEADER = 61    # a v2 batch's header: builder.size is this + its records


class Accumulator:
    """The producer's batches and their counts (see the module docstring)."""

    def __init__(self, seal_size: int, buffer_memory: int, wake: Callable[[], Any]) -> None:
        self.lock = threading.Lock()
        self.open: dict[tuple[str, int], Any] = {}
        self.queues: dict[tuple[str, int], deque] = {}
        self.next_seq: dict[tuple[str, int], int] = {}
        self.counts: dict[str, int] = {}
        self.pending = 0
        self.buffered = 0
        self.closed = False
        self.fatal: BaseException | None = None
        self.seal_size = seal_size
        self.limit = buffer_memory
        self.wake = wake
        self.future: Any = None
        self.slow: Any = None

    def bind(self, future_type: type, slow: Any = None) -> None:
        """``keyed`` makes ``future_type()`` futures; ``send`` hands what it does not take
        to ``slow``."""
        self.future = future_type
        self.slow = slow

    def account(self, b: Any) -> None:
        """A batch leaves ``open``: its size, its records pending and its bytes buffered
        (lock held). Open batches, at most one per partition, are not counted in
        ``buffered`` (Java reserves a whole batch_size for each instead)."""
        if b.builder is not None:
            b.size = b.builder.size - _HEADER
        self.pending += len(b.timestamps)
        self.buffered += b.size

    def seal(self, tp: tuple[str, int], b: Any) -> None:
        """Move the open batch of ``tp`` (or a batch made elsewhere) to its send queue, and
        advance the partition's next sequence past it (lock held)."""
        if self.open.get(tp) is b:
            del self.open[tp]
            self.account(b)
        if b.sequence >= 0:
            self.next_seq[tp] = (b.sequence + len(b.timestamps)) & 0x7FFFFFFF
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = deque()
        q.append(b)

    def send(self, topic: str, value: Any = None, key: Any = None, partition: Any = None,
             headers: Any = None, timestamp: Any = None) -> Any:
        """See the module's docstring."""
        if partition is None:
            fut = self.keyed(topic, key, value, headers, timestamp)
            if fut is not None:
                return fut
        return self.slow(topic, value, key, partition, headers, timestamp)

    def keyed(self, topic: str, key: bytes, value: Any, headers: Any, timestamp: Any) -> Any:
        """The record's future, or None: the producer's own path must take it."""
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            return None
        count = self.counts.get(topic)
        if count is None or type(count) is not int or count <= 0 or self.buffered > self.limit:
            return None
        tp = (topic, partition_for_key(key, count))
        lock = self.lock
        lock.acquire()
        try:
            if self.closed or self.fatal is not None:
                return None
            b = self.open.get(tp)
            if b is None:
                return None
            ts = b.timestamps
            builder = b.builder
            if not builder.add(key, value, headers, timestamp, ts):
                return None
            idx = len(ts) - 1
            if builder.size >= self.seal_size:
                self.seal(tp, b)
                self.wake()
        finally:
            lock.release()
        fut = self.future()
        fut.batch = b
        fut.index = idx
        return fut
