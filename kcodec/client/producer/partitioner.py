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
"""

from __future__ import annotations

import bisect
import random

from kcodec.murmur import murmur2, partition_for_key

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner", "DefaultPartitioner"]


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
