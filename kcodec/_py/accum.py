"""The producer's per-record step for a record whose partition is chosen (the reference
twin of kcodec._cy.accum).

    a = Appender(engine, future_type, seal_size, buffer_memory, slow=None)
    a.keyed(topic, key, value, headers, timestamp) -> future | None
    a.send(topic, value=None, key=None, partition=None, headers=None, timestamp=None)

``keyed`` takes a record with a bytes key and no chosen partition: its value bytes or None, its topic's partition count known
(``engine.counts``), ``engine.buffered`` not above ``buffer_memory``; the partition is the
key's murmur2 (kcodec.client.producer.partitioner.partition_for_key). Then, under ``engine.lock``: the partition's open batch (``engine.open[(topic, partition)]``)
takes the record through its builder's ``add`` (the timestamp goes on ``batch.timestamps``);
a batch whose builder reaches ``seal_size`` bytes is sealed (``engine._seal``) and the
sender woken (``engine._kick``). The result is ``future_type()`` (a class without
``__init__``) with ``_batch`` and ``_index`` set, or None when the engine must take the
record itself: closed or failed, no open batch, or the open batch full. An error in the
record (``add``'s) propagates with the lock released and nothing added.

``send`` has ``Producer.send``'s signature and is bound as the producer instance's ``send``
(one call per record, no Python frame of the producer's in between): ``keyed`` when no
partition is given, else (or when ``keyed`` returns None) ``slow`` with the same arguments
(the producer's general path).
"""

from __future__ import annotations

from typing import Any

from kcodec._py.murmur import partition_for_key

__all__ = ["Appender"]


class Appender:
    """The fast path of the producer's ``append`` (no transaction, partition chosen)."""

    __slots__ = ("_engine", "_lock", "_open", "_fut", "_seal_size", "_counts", "_limit",
                 "_slow")

    def __init__(self, engine: Any, future_type: type, seal_size: int,
                 buffer_memory: int, slow: Any = None) -> None:
        self._engine = engine
        self._slow = slow
        self._counts = engine.counts
        self._limit = buffer_memory
        self._lock = engine.lock
        self._open = engine.open
        self._fut = future_type
        self._seal_size = seal_size

    def send(self, topic: str, value: Any = None, key: Any = None, partition: Any = None,
             headers: Any = None, timestamp: Any = None) -> Any:
        """See the module's docstring."""
        if partition is None:
            fut = self.keyed(topic, key, value, headers, timestamp)
            if fut is not None:
                return fut
        return self._slow(topic, value, key, partition, headers, timestamp)

    def keyed(self, topic: str, key: bytes, value: Any, headers: Any, timestamp: Any) -> Any:
        """The record's future, or None: the producer's own path must take it."""
        eng = self._engine
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            return None
        count = self._counts.get(topic)
        if count is None or type(count) is not int or count <= 0 or eng.buffered > self._limit:
            return None
        tp = (topic, partition_for_key(key, count))
        lock = self._lock
        lock.acquire()
        try:
            if eng.closed or eng.fatal is not None:
                return None
            b = self._open.get(tp)
            if b is None:
                return None
            ts = b.timestamps
            builder = b.builder
            if not builder.add(key, value, headers, timestamp, ts):
                return None
            idx = len(ts) - 1
            if builder.size >= self._seal_size:
                eng._seal(tp, b)
                eng._kick()
        finally:
            lock.release()
        fut = self._fut()
        fut._batch = b
        fut._index = idx
        return fut
