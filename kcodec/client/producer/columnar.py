"""The producer's columnar send path: whole Arrow columns to queued batches.

``Producer.send_columns(topic, value, key=..., headers=..., partition=...)`` takes pyarrow
arrays (binary or string, list<struct<key: string, value: binary>> headers, int32
partitions with nulls for "choose"), picks each row's partition as the default
partitioner does (murmur2 of the key, computed over the whole key column at once; keyless
rows stick to one partition per call), groups the rows by partition, cuts them into batches
of about ``batch_size`` bytes and encodes each with kcodec.records.columns_encode. The
batches go to the producer's queues already built, with the producer id and sequence of
the idempotent producer, and are sent, retried and acknowledged like any other batch.
"""

from __future__ import annotations

import time
from typing import Any

from kcodec.records.columns_encode import (
    build_batch,
    column_buffers,
    encode_records,
    headers_buffers,
)
from kcodec.records.header import HEADER_SIZE

__all__ = ["murmur2_column", "plan_send", "PrebuiltBatch", "partition_column"]

_M = 0x5BD1E995
_SEED = 0x9747B28C


def _np() -> Any:
    import numpy as np

    return np


def murmur2_column(offsets: Any, data: Any) -> Any:
    """The Java client's murmur2 of every value of a binary column (uint32 array)."""
    np = _np()
    starts = offsets[:-1]
    lens = (offsets[1:] - starts).astype(np.int64)
    m = np.uint32(_M)
    h = np.uint32(_SEED) ^ lens.astype(np.uint32)
    nblocks = lens >> 2
    with np.errstate(over="ignore"):
        for j in range(int(nblocks.max()) if len(lens) else 0):
            rows = np.nonzero(nblocks > j)[0]
            p = starts[rows] + 4 * j
            k = (data[p].astype(np.uint32) | (data[p + 1].astype(np.uint32) << 8)
                 | (data[p + 2].astype(np.uint32) << 16) | (data[p + 3].astype(np.uint32) << 24))
            k = k * m
            k ^= k >> np.uint32(24)
            k = k * m
            h[rows] = (h[rows] * m) ^ k
        rem = lens & 3
        tail = starts + 4 * nblocks
        for b in (2, 1, 0):
            rows = np.nonzero(rem > b)[0]
            if len(rows):
                h[rows] ^= data[tail[rows] + b].astype(np.uint32) << np.uint32(8 * b)
        rows = np.nonzero(rem > 0)[0]
        h[rows] = h[rows] * m
        h ^= h >> np.uint32(13)
        h = h * m
        h ^= h >> np.uint32(15)
    return h




class PrebuiltBatch:
    """What the producer's queue holds instead of a RecordBatchBuilder: the encoded
    records, stamped with the producer id and sequence when the engine queues it."""

    __slots__ = ("records", "count", "timestamp", "codec", "level", "producer_id", "epoch",
                 "sequence", "transactional")

    def __init__(self, records: bytes, count: int, timestamp: int, codec: int,
                 level: Any) -> None:
        self.records, self.count, self.timestamp = records, count, timestamp
        self.codec, self.level = codec, level
        self.producer_id, self.epoch, self.sequence = -1, -1, -1
        self.transactional = False

    def stamp(self, producer_id: int, epoch: int, sequence: int,
              transactional: bool = False) -> None:
        self.producer_id, self.epoch, self.sequence = producer_id, epoch, sequence
        self.transactional = transactional

    def build(self) -> bytes:
        return build_batch(self.records, self.count, self.timestamp, self.codec, self.level,
                           self.producer_id, self.epoch, self.sequence, self.transactional)


def _as_array(v: Any, what: str) -> Any:
    import pyarrow as pa

    if v is None:
        return None
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks()
    if not isinstance(v, pa.Array):
        raise TypeError(f"{what} must be a pyarrow Array, not {type(v).__name__}")
    return v


def partition_column(hooks: Any, topic: str, value: Any, key: Any, partition: Any,
                     count: int) -> Any:
    """The partition column with the rows the caller left to choose (null, or no column)
    chosen by the producer's ``partitioner`` hook (kcodec.client.producer.hooks): one call
    per such row. Keyless rows a ``*_random`` built-in leaves sticky stay null."""
    import pyarrow as pa

    n = len(_as_array(value, "value"))
    key = _as_array(key, "key")
    partition = _as_array(partition, "partition")
    keys = key.to_pylist() if key is not None else [None] * n
    given = partition.to_pylist() if partition is not None else [None] * n
    for name, col in (("key", keys), ("partition", given)):
        if len(col) != n:
            raise ValueError(f"{name} has {len(col)} rows, value has {n}")
    out = []
    for k, p in zip(keys, given, strict=False):
        if p is None:
            k = k.encode() if isinstance(k, str) else k
            p = hooks.choose(topic, k, count)
        out.append(None if p < 0 else p)
    return pa.array(out, type=pa.int32())


def plan_send(value: Any, key: Any, headers: Any, partition: Any, count: int,
              sticky: int, batch_bytes: int, codec: int, level: Any,
              timestamp: int | None = None) -> list[tuple[int, PrebuiltBatch, int]]:
    """Encode the rows into batches: [(partition, batch, size in bytes)], each partition's
    batches in row order. ``sticky`` is the partition of keyless rows."""
    np = _np()
    value = _as_array(value, "value")
    key = _as_array(key, "key")
    headers = _as_array(headers, "headers")
    partition = _as_array(partition, "partition")
    n = len(value)
    for name, arr in (("key", key), ("headers", headers), ("partition", partition)):
        if arr is not None and len(arr) != n:
            raise ValueError(f"{name} has {len(arr)} rows, value has {n}")
    vcol = column_buffers(value, "value")
    kcol = column_buffers(key, "key") if key is not None else None
    # partitions: explicit, else murmur2(key), else sticky
    parts = np.full(n, sticky, dtype=np.int64)
    if kcol is not None:
        h = murmur2_column(kcol[0], kcol[1])
        hashed = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % count
        if kcol[2] is None:
            parts = hashed
        else:
            parts = np.where(kcol[2], hashed, parts)
    if partition is not None:
        pv = np.asarray(partition.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        bad = (pv >= count) | (pv < -1)
        if bad.any():
            raise ValueError(f"partition {int(pv[bad][0])} out of range (the topic has "
                             f"{count} partitions)")
        parts = np.where(pv >= 0, pv, parts)
    hdr = None
    if headers is not None:
        hdr = headers_buffers(headers)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    sizes = vcol[0][1:] - vcol[0][:-1]
    if kcol is not None:
        sizes = sizes + (kcol[0][1:] - kcol[0][:-1])
    if hdr is not None:
        sizes = sizes + (hdr[1][hdr[3] + hdr[0]] - hdr[1][hdr[3]])
    sizes = sizes + 8
    out = []
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
    for group in np.split(order, bounds):
        if not len(group):
            continue
        p = int(parts[group[0]])
        cum = np.cumsum(sizes[group])
        # cut into batches of about batch_bytes (at least one row each)
        cuts = []
        start = 0
        base = 0
        while start < len(group):
            end = int(np.searchsorted(cum, base + batch_bytes, side="right"))
            end = max(end, start + 1)
            cuts.append((start, end))
            base = int(cum[end - 1])
            start = end
        for s, e in cuts:
            rows = group[s:e]
            records, cnt = encode_records(rows, kcol, vcol, hdr)
            out.append((p, PrebuiltBatch(records, cnt, ts, codec, level),
                        len(records) + HEADER_SIZE))
    return out


