"""Choosing a partition for a record, exactly as the Java client's default partitioner does.

* explicit partition: used as is;
* a key: ``(murmur2(key) & 0x7fffffff) % partition_count``, murmur2 being the 32-bit
  MurmurHash2 variant of the Java client (seed 0x9747b28c, little-endian 4-byte blocks) --
  the same partition as librdkafka's ``murmur2_random`` and kafka-python's default;
* no key: sticky -- one partition is kept until its batch is sent (``on_new_batch``), then
  another is chosen at random, so keyless records form large batches.
"""

from __future__ import annotations

import random

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.murmur import murmur2, partition_for_key
else:
    from kcodec._py.murmur import murmur2, partition_for_key  # type: ignore[assignment]

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner", "DefaultPartitioner"]


class StickyPartitioner:
    """Keyless records stay on one partition per topic until ``on_new_batch`` is called."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, partition_count: int) -> int:
        p = self._current.get(topic)
        if p is None or p >= partition_count:
            p = self._rng.randrange(partition_count)
            self._current[topic] = p
        return p

    def on_new_batch(self, topic: str, partition_count: int, previous: int) -> None:
        """The batch on ``previous`` is full or sent: move to another partition."""
        if self._current.get(topic) != previous or partition_count <= 1:
            return
        p = self._rng.randrange(partition_count - 1)
        self._current[topic] = p + 1 if p >= previous else p


class DefaultPartitioner:
    """Explicit partition, else key hash, else sticky."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.sticky = StickyPartitioner(rng)

    def __call__(self, topic: str, key: bytes | None, partition_count: int) -> int:
        if key is not None:
            return partition_for_key(key, partition_count)
        return self.sticky.partition(topic, partition_count)
