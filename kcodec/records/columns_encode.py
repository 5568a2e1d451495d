"""Columnar encode: record batches straight from whole Arrow columns, no per-row Python.

The counterpart of ``decode_columns`` (kcodec.records.columns) for producers that hold
columns (``Producer.send_columns``, the Spark sink): the rows of pyarrow binary or string
key/value arrays and list<struct<key: string, value: binary>> headers become the records
section of a v2 batch, written with numpy, every record with timestamp delta 0::

    record := length varint, attributes int8 = 0, timestamp_delta varlong = 0,
              offset_delta varint, key_length varint (-1 null), key,
              value_length varint (-1 null), value, header_count varint,
              (key_length varint, key, value_length varint (-1 null), value)*

Every varint is written for all rows of a batch at once (one vector pass per byte
position), every key, value and header by one gather/scatter. ``build_batch`` puts the
header (kcodec.records.header) and the compression around it. The bytes are the same as
``RecordBatchBuilder`` makes for the same records (a test checks it).

    cols = column_buffers(value_array, "value")        # (offsets, data, validity)
    section, count = encode_records(rows, key_cols, cols, headers_buffers(headers_array))
    batch = build_batch(section, count, timestamp, codec, level, producer_id, epoch, seq)

numpy is needed (imported on the first call), and pyarrow for the column buffers.
"""

from __future__ import annotations

from typing import Any

from kcodec.records.header import (
    ATTR_TRANSACTIONAL,
    ENTRY_OVERHEAD,
    HEADER_SIZE,
    new_header,
    set_crc,
)

__all__ = ["column_buffers", "headers_buffers", "encode_records", "build_batch"]


def _np() -> Any:
    import numpy as np

    return np


def column_buffers(arr: Any, what: str) -> tuple[Any, Any, Any]:
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
    to = t + np.repeat(dst - cum, lens)
    first = int(src_start[0])
    if first + total <= len(data) and np.array_equal(src_start - first, cum):
        out[to] = data[first:first + total]   # the rows' bytes are one run (an Arrow column)
    else:
        out[to] = data[t + np.repeat(src_start - cum, lens)]


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
                producer_id: int, epoch: int, sequence: int,
                transactional: bool = False) -> bytes:
    """A RecordBatch v2 around an encoded records section (see RecordBatchBuilder.build);
    ``transactional`` sets the batch's transactional attribute."""
    from kcodec.compression import compress

    payload = compress(codec, records, level) if codec else records
    attributes = codec | (ATTR_TRANSACTIONAL if transactional else 0)
    out = new_header(batch_length=HEADER_SIZE - ENTRY_OVERHEAD + len(payload),
                     attributes=attributes,
                     last_offset_delta=count - 1, first_timestamp=timestamp,
                     max_timestamp=timestamp, record_count=count, producer_id=producer_id,
                     producer_epoch=epoch, base_sequence=sequence)
    out += payload
    set_crc(out)
    return bytes(out)


def headers_buffers(headers: Any) -> tuple[Any, Any, Any, Any]:
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
    counts, hstarts, blob = _encode_headers(hoffs, hvalid, column_buffers(keys, "header key"),
                                            column_buffers(vals, "header value"))
    return counts, hstarts, blob, hoffs[:-1]
