"""Choosing a partition for a record, as the Java client's default partitioner does.

* explicit partition: used as is;
* a key: ``(murmur2(key) & 0x7fffffff) % partition_count``, murmur2 being the 32-bit
  MurmurHash2 variant of the Java client (seed 0x9747b28c, little-endian 4-byte blocks) --
  the same partition as librdkafka's ``murmur2_random`` and kafka-python's default;
* no key: the uniform sticky partitioner of KIP-794 (Java's built-in partitioner since
  3.3). Records stick to one partition until ``batch_size`` bytes were produced to it
  *and* its last batch is full (or ``2 * batch_size`` bytes in any case), then the next
  partition is drawn at random -- uniformly while every partition's queue of unsent
  batches has the same length, otherwise weighted towards the shorter queues
  (``update_load``), so partitions led by a slow broker get fewer records.

The ``partitioner`` setting replaces that choice for records without a partition
(``make_partitioner``): librdkafka's names for its built-in ones, a callable
``(topic, key_bytes, partition_count) -> int``, an object with such a ``partition``
method, or ``"module:attr"`` naming one of those. ``murmur2_random`` (the default) is the
behaviour above. The others, as librdkafka defines them:

* ``murmur2``: every record by murmur2 of its key, a keyless one as the empty key;
* ``consistent``: CRC-32 of the key modulo the partition count (keyless: the empty key);
* ``consistent_random``: CRC-32 of the key; keyless records and the empty key sticky;
* ``random``: each record to a uniformly random partition, key or not.

A user's partitioner decides every record without a partition, keyless ones too (as in
Java, where the sticky choice is the default partitioner's own); what it returns must be
an ``int`` in ``[0, partition_count)``, else that send fails with ``PartitionerError``.
"""

from __future__ import annotations

import bisect
import operator
import random
import zlib
from collections.abc import Callable
from typing import Any

from kcodec.client.errors import PartitionerError
from kcodec.client.hooks import resolve
from kcodec.murmur import murmur2, partition_for_key

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner", "DefaultPartitioner",
           "UserPartitioner", "make_partitioner", "PARTITIONERS", "DEFAULT_PARTITIONER"]

DEFAULT_PARTITIONER = "murmur2_random"


class StickyPartitioner:
    """Keyless records: KIP-794's uniform sticky partitioner (see the module docstring).

    ``partition`` is the topic's current partition; ``on_append`` counts the bytes
    produced to it and switches when due; ``update_load`` gives the queue lengths the
    next draw is weighted by (adaptive partitioning, as Java's default).
    """

    def __init__(self, rng: random.Random | None = None, batch_size: int = 16384,
                 adaptive: bool = True) -> None:
        self._rng = rng or random.Random()
        self.batch_size = max(int(batch_size), 1)
        self.adaptive = adaptive
        self._current: dict[str, int] = {}
        self._produced: dict[str, int] = {}
        self._load: dict[str, list[int]] = {}   # topic -> cumulative weights by partition

    def partition(self, topic: str, partition_count: int) -> int:
        p = self._current.get(topic)
        if p is None or p >= partition_count:
            p = self._next(topic, partition_count)
        return p

    def on_append(self, topic: str, partition_count: int, partition: int, size: int,
                  batch_full: bool) -> None:
        """``size`` bytes were appended to ``partition``; ``batch_full``: its last batch is
        full (ready to send), so moving on does not leave a small batch behind."""
        if self._current.get(topic) != partition:
            return
        produced = self._produced.get(topic, 0) + size
        if (produced >= self.batch_size and batch_full) or produced >= 2 * self.batch_size:
            self._next(topic, partition_count)
        else:
            self._produced[topic] = produced

    def on_new_batch(self, topic: str, partition_count: int, previous: int) -> None:
        """Move on from ``previous`` now (if it is still the topic's current partition)."""
        if self._current.get(topic) == previous:
            self._next(topic, partition_count)

    def update_load(self, topic: str, queue_sizes: list[int]) -> None:
        """Unsent batches per partition (index = partition) of ``topic``: the next draw
        favours partitions with shorter queues; equal queues mean a uniform draw."""
        if not self.adaptive or len(queue_sizes) < 2 or min(queue_sizes) == max(queue_sizes):
            self._load.pop(topic, None)
            return
        top = max(queue_sizes) + 1
        total, cumulative = 0, []
        for q in queue_sizes:
            total += top - q
            cumulative.append(total)
        self._load[topic] = cumulative

    def _next(self, topic: str, partition_count: int) -> int:
        cumulative = self._load.get(topic)
        if cumulative is not None and len(cumulative) == partition_count:
            p = bisect.bisect_right(cumulative, self._rng.randrange(cumulative[-1]))
        else:
            p = self._rng.randrange(partition_count)
        self._current[topic] = p
        self._produced[topic] = 0
        return p


class DefaultPartitioner:
    """Explicit partition, else key hash, else sticky."""

    def __init__(self, rng: random.Random | None = None, batch_size: int = 16384) -> None:
        self.sticky = StickyPartitioner(rng, batch_size)

    def __call__(self, topic: str, key: bytes | None, partition_count: int) -> int:
        if key is not None:
            return partition_for_key(key, partition_count)
        return self.sticky.partition(topic, partition_count)


class UserPartitioner:
    """A partitioner other than the default: ``choose(topic, key, count)`` calls it and
    checks its answer. ``sticky_keyless``: keyless records go to the sticky partitioner
    instead (librdkafka's ``*_random`` built-ins); ``sticky_empty``: the empty key too
    (``consistent_random``)."""

    __slots__ = ("fn", "name", "sticky_keyless", "sticky_empty")

    def __init__(self, fn: Callable[[str, bytes | None, int], Any], name: str,
                 sticky_keyless: bool = False, sticky_empty: bool = False) -> None:
        self.fn, self.name, self.sticky_keyless = fn, name, sticky_keyless
        self.sticky_empty = sticky_empty

    def sticky(self, key: bytes | None) -> bool:
        """Whether a record with ``key`` goes to the sticky partitioner instead."""
        return self.sticky_keyless and (key is None or (self.sticky_empty and not key))

    def choose(self, topic: str, key: bytes | None, count: int) -> int:
        try:
            p = self.fn(topic, key, count)
        except Exception as exc:
            raise PartitionerError(topic, count, f"{self.name} raised "
                                   f"{type(exc).__name__}: {exc}") from exc
        try:
            if isinstance(p, bool):
                raise TypeError
            p = operator.index(p)
        except TypeError:
            raise PartitionerError(topic, count, f"{self.name} returned {p!r}, not a "
                                   "partition number") from None
        if not 0 <= p < count:
            raise PartitionerError(topic, count, f"{self.name} returned partition {p}, "
                                   f"outside 0..{count - 1}")
        return p

    def __repr__(self) -> str:
        return f"UserPartitioner({self.name})"


def _consistent(topic: str, key: bytes | None, count: int) -> int:
    return zlib.crc32(key or b"") % count


def _murmur2(topic: str, key: bytes | None, count: int) -> int:
    return partition_for_key(key or b"", count)


def _builtin(name: str) -> UserPartitioner:
    if name == "murmur2":
        return UserPartitioner(_murmur2, name)
    if name == "consistent":
        return UserPartitioner(_consistent, name)
    if name == "consistent_random":
        return UserPartitioner(_consistent, name, sticky_keyless=True, sticky_empty=True)
    rng = random.Random()
    return UserPartitioner(lambda topic, key, count: rng.randrange(count), name)


# librdkafka's names (``partitioner``); the default's is None: the compiled send path
PARTITIONERS: dict[str, Callable[[str], UserPartitioner] | None] = {
    DEFAULT_PARTITIONER: None, "murmur2": _builtin, "consistent": _builtin,
    "consistent_random": _builtin, "random": _builtin}


def make_partitioner(value: Any) -> UserPartitioner | None:
    """The ``partitioner`` setting -> the partitioner to call (None: the default's own
    path). A ``ValueError`` says what the setting takes."""
    if value is None:
        return None
    if isinstance(value, str) and ":" not in value:
        name = value.strip().lower()
        if name not in PARTITIONERS:
            raise ValueError(f"partitioner: unknown name {value!r}; the built-in ones are "
                             f"{', '.join(PARTITIONERS)}, or give a callable (topic, key, "
                             "partition_count) -> int, or 'module:attr' naming one")
        make = PARTITIONERS[name]
        return None if make is None else make(name)
    obj = resolve(value, "partitioner")
    if isinstance(obj, str):
        return make_partitioner(obj)
    if isinstance(obj, type) and callable(getattr(obj, "partition", None)):
        obj = obj()                       # a class, as Java names one: one instance
    fn = getattr(obj, "partition", None)
    if not callable(fn):
        fn = obj if callable(obj) and not isinstance(obj, type) else None
    if fn is None:
        raise ValueError(f"partitioner must be a callable (topic, key, partition_count) -> "
                         f"int, an object with such a partition method, a built-in name or "
                         f"'module:attr', not {type(obj).__name__}")
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return UserPartitioner(fn, name)
