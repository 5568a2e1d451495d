"""The producer's columnar send path: whole Arrow columns to record batches, no per-row
Python work.

``Producer.send_columns(topic, value, key=..., headers=..., partition=...)`` takes pyarrow
arrays (binary or string, list<struct<key: string, value: binary>> headers, int32
partitions with nulls for "choose"), picks each row's partition as the default
partitioner does (murmur2 of the key, computed over the whole key column at once; keyless
rows stick to one partition per call), groups the rows by partition and writes
RecordBatch v2 bytes straight from the columns with numpy:

    record := length varint, attributes int8 = 0, timestamp_delta varlong = 0,
              offset_delta varint, key_length varint (-1 null), key,
              value_length varint (-1 null), value, header_count varint,
              (key_length varint, key, value_length varint (-1 null), value)*

Every varint is written for all rows of a batch at once (one vector pass per byte
position), every key, value and header by one gather/scatter. The bytes are the same as
``RecordBatchBuilder`` makes for the same records (a test checks it); the batches go to the
producer's queues already built, with the producer id and sequence of the idempotent
producer, and are sent, retried and acknowledged like any other batch.
"""

from __future__ import annotations

import struct
import time
from typing import Any

__all__ = ["murmur2_column", "encode_records", "build_batch", "plan_send"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61


def _np() -> Any:
    import numpy as np

    return np


def _binary(arr: Any, what: str) -> tuple[Any, Any, Any]:
    """(offsets int64[n+1], data uint8, valid bool[n] or None) of a pyarrow binary/string
    array (any offset width, sliced or not), sharing its memory."""
    np = _np()
    import pyarrow as pa

    t = arr.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        odt = np.int64
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        odt = np.int32
    else:
        raise TypeError(f"{what} must be a binary or string column, not {t}")
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=odt, count=n + 1, offset=arr.offset * odt().itemsize)
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and \
        bufs[2].size else np.zeros(0, dtype=np.uint8)
    valid = None
    if arr.null_count:
        valid = np.asarray(arr.is_valid())
    return offsets, data, valid


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


def _zz(v: Any) -> Any:
    """Zigzag of int64 values as uint64."""
    np = _np()
    v = v.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def _varint_sizes(u: Any) -> Any:
    np = _np()
    s = np.ones(len(u), dtype=np.int64)
    x = u >> np.uint64(7)
    while True:
        more = x != 0
        if not more.any():
            return s
        s += more
        x = x >> np.uint64(7)


def _put_varints(out: Any, pos: Any, u: Any, sizes: Any) -> None:
    np = _np()
    for b in range(int(sizes.max()) if len(sizes) else 0):
        rows = np.nonzero(sizes > b)[0]
        byte = ((u[rows] >> np.uint64(7 * b)) & np.uint64(0x7F)).astype(np.uint8)
        byte[sizes[rows] > b + 1] |= 0x80
        out[pos[rows] + b] = byte


def _put_bytes(out: Any, dst: Any, src_start: Any, lens: Any, data: Any) -> None:
    np = _np()
    total = int(lens.sum())
    if not total:
        return
    cum = np.cumsum(lens) - lens
    t = np.arange(total, dtype=np.int64)
    out[t + np.repeat(dst - cum, lens)] = data[t + np.repeat(src_start - cum, lens)]


class _Pieces:
    """Per-row concatenation of varint and byte pieces into one buffer."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.items: list[tuple] = []

    def varint(self, u: Any) -> Any:
        sizes = _varint_sizes(u)
        self.items.append(("v", u, sizes))
        return sizes

    def fixed_byte(self, value: int) -> Any:
        np = _np()
        sizes = np.ones(self.n, dtype=np.int64)
        self.items.append(("b", value, sizes))
        return sizes

    def bytes(self, starts: Any, lens: Any, data: Any) -> Any:
        self.items.append(("d", (starts, data), lens))
        return lens

    def total(self) -> Any:
        np = _np()
        t = np.zeros(self.n, dtype=np.int64)
        for it in self.items:
            t += it[2]
        return t

    def write(self, out: Any, row_starts: Any) -> None:
        pos = row_starts.copy()
        for kind, payload, sizes in self.items:
            if kind == "v":
                _put_varints(out, pos, payload, sizes)
            elif kind == "b":
                out[pos] = payload
            else:
                starts, data = payload
                _put_bytes(out, pos, starts, sizes, data)
            pos += sizes


def _nullable_len(offsets: Any, valid: Any) -> tuple[Any, Any, Any]:
    """(starts, byte lengths with 0 for null, the length field with -1 for null)."""
    np = _np()
    starts = offsets[:-1]
    lens = offsets[1:] - starts
    field = lens.copy()
    if valid is not None:
        lens = np.where(valid, lens, 0)
        field = np.where(valid, field, -1)
    return starts, lens, field


def _encode_headers(hoffs: Any, hvalid: Any, keys: tuple, values: tuple) -> tuple[Any, Any,
                                                                                  Any]:
    """The headers of every row: (count per row, row byte starts, blob)."""
    np = _np()
    ko, kd, _kv = keys
    vo, vd, vv = values
    nh = len(ko) - 1
    p = _Pieces(nh)
    ks, kl, kf = _nullable_len(ko, None)
    p.varint(_zz(kf))
    p.bytes(ks, kl, kd)
    vs, vl, vf = _nullable_len(vo, vv)
    p.varint(_zz(vf))
    p.bytes(vs, vl, vd)
    sizes = p.total()
    hstarts = np.zeros(nh + 1, dtype=np.int64)
    np.cumsum(sizes, out=hstarts[1:])
    blob = np.empty(int(hstarts[-1]), dtype=np.uint8)
    p.write(blob, hstarts[:-1])
    counts = hoffs[1:] - hoffs[:-1]
    if hvalid is not None:
        counts = np.where(hvalid, counts, 0)
    return counts, hstarts, blob


def encode_records(rows: Any, key: Any, value: Any, headers: Any) -> tuple[bytes, int]:
    """The records section of a batch of the rows ``rows`` (indices) of the columns, with
    timestamp delta 0: (bytes, record count)."""
    np = _np()
    n = len(rows)
    p = _Pieces(n)

    def col(c: Any) -> tuple[Any, Any, Any, Any]:
        offsets, data, valid = c
        s, ln, f = _nullable_len(offsets, valid)
        return s[rows], ln[rows], f[rows], data

    body = _Pieces(n)
    body.fixed_byte(0)                                   # attributes
    body.fixed_byte(0)                                   # timestamp delta 0 (zigzag 0)
    body.varint(_zz(np.arange(n, dtype=np.int64)))       # offset delta
    if key is None:
        body.fixed_byte(1)                               # key length -1 (zigzag 1)
    else:
        ks, kl, kf, kd = col(key)
        body.varint(_zz(kf))
        body.bytes(ks, kl, kd)
    vs, vl, vf, vd = col(value)
    body.varint(_zz(vf))
    body.bytes(vs, vl, vd)
    if headers is None:
        body.fixed_byte(0)
    else:
        counts, hstarts, blob, first_of = headers
        c = counts[rows]
        body.varint(_zz(c))
        # the headers of row i are contiguous in the blob
        first = first_of[rows]
        lo = hstarts[first]
        hi = hstarts[first + c]
        body.bytes(lo, hi - lo, blob)
    blen = body.total()
    p.varint(_zz(blen))
    p.items.extend(body.items)
    sizes = p.total()
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    out = np.empty(int(starts[-1]), dtype=np.uint8)
    p.write(out, starts[:-1])
    return out.tobytes(), n


def build_batch(records: bytes, count: int, timestamp: int, codec: int, level: Any,
                producer_id: int, epoch: int, sequence: int) -> bytes:
    """A RecordBatch v2 around an encoded records section (see RecordBatchBuilder.build)."""
    from kcodec.compression import compress
    from kcodec.crc import crc32c

    payload = compress(codec, records, level) if codec else records
    length = HEADER_SIZE - 12 + len(payload)
    out = bytearray(_HEADER.pack(0, length, -1, 2, 0, codec, count - 1, timestamp, timestamp,
                                 producer_id, epoch, sequence, count))
    out += payload
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


class PrebuiltBatch:
    """What the producer's queue holds instead of a RecordBatchBuilder: the encoded
    records, stamped with the producer id and sequence when the engine queues it."""

    __slots__ = ("records", "count", "timestamp", "codec", "level", "producer_id", "epoch",
                 "sequence")

    def __init__(self, records: bytes, count: int, timestamp: int, codec: int,
                 level: Any) -> None:
        self.records, self.count, self.timestamp = records, count, timestamp
        self.codec, self.level = codec, level
        self.producer_id, self.epoch, self.sequence = -1, -1, -1

    def stamp(self, producer_id: int, epoch: int, sequence: int) -> None:
        self.producer_id, self.epoch, self.sequence = producer_id, epoch, sequence

    def build(self) -> bytes:
        return build_batch(self.records, self.count, self.timestamp, self.codec, self.level,
                           self.producer_id, self.epoch, self.sequence)


def _as_array(v: Any, what: str) -> Any:
    import pyarrow as pa

    if v is None:
        return None
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks()
    if not isinstance(v, pa.Array):
        raise TypeError(f"{what} must be a pyarrow Array, not {type(v).__name__}")
    return v


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
    vcol = _binary(value, "value")
    kcol = _binary(key, "key") if key is not None else None
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
        hdr = _headers_blob(headers)
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


def _headers_blob(headers: Any) -> tuple[Any, Any, Any, Any]:
    """(count per row, header byte starts, blob, first header index per row)."""
    np = _np()
    import pyarrow as pa

    t = headers.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or \
            not pa.types.is_struct(t.value_type):
        raise TypeError(f"headers must be list<struct<key: string, value: binary>>, not {t}")
    odt = np.int64 if pa.types.is_large_list(t) else np.int32
    n = len(headers)
    hoffs = np.frombuffer(headers.buffers()[1], dtype=odt, count=n + 1,
                          offset=headers.offset * odt().itemsize).astype(np.int64)
    hvalid = np.asarray(headers.is_valid()) if headers.null_count else None
    entries = headers.values
    keys = entries.field("key")
    vals = entries.field("value")
    if keys.null_count:
        raise ValueError("a header key is null: header keys must be strings")
    counts, hstarts, blob = _encode_headers(hoffs, hvalid, _binary(keys, "header key"),
                                            _binary(vals, "header value"))
    return counts, hstarts, blob, hoffs[:-1]
