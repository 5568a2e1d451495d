"""murmur2 as the Java client's ``Utils.murmur2`` computes it (pure-Python twin).

    h = seed(0x9747b28c) ^ len
    for each little-endian uint32 block k:  k *= m; k ^= k >> 24; k *= m; h *= m; h ^= k
    tail (1-3 bytes, little-endian) xored in, then h *= m
    h ^= h >> 13; h *= m; h ^= h >> 15            (m = 0x5bd1e995, 32-bit wrap-around)

The result is the signed 32-bit value Java returns. ``partition_for_key`` makes it positive
(``& 0x7fffffff``) and takes it modulo the partition count, like the Java default
partitioner and librdkafka's ``murmur2_random``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["murmur2", "partition_for_key"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: Any) -> int:
    """The Java client's murmur2 of ``data`` (any bytes-like object): a signed 32-bit int."""
    if type(data) is not bytes:
        try:
            data = memoryview(data).tobytes()
        except TypeError:
            raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: Any, partition_count: int) -> int:
    """``(murmur2(key) & 0x7fffffff) % partition_count``."""
    if partition_count <= 0:
        raise ValueError(f"partition count must be positive, got {partition_count}")
    return (murmur2(key) & 0x7FFFFFFF) % partition_count
