"""The fast path of a log segment's recovery scan: runs of whole, valid v2 batches.

Wire layout read (the v2 batch header; see kcodec.records for the rest):

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 (= 2)
    | crc uint32 (CRC-32C of attributes .. end) | attributes int16 | last_offset_delta int32
    | first_timestamp int64 | max_timestamp int64 | producer_id int64 | producer_epoch int16
    | base_sequence int32 | record_count int32 | records ...       61 header bytes

``scan_valid_v2`` walks from ``start`` over consecutive magic 2 batches that the broker's
recovery accepts: whole (``batch_length`` >= 49 and within the buffer), a non-negative
record count, a matching CRC-32C, and offsets with ``base_offset <= first <= last <=
base_offset + 2**31 - 1``. It stops, without raising, before the first entry it cannot
vouch for (any other magic, a torn or malformed batch, a bad CRC, offsets out of range);
``LogSegment.recover`` then reads that entry with the full reader, which says what is wrong.

``scan_records_v2`` checks the records section of one v2 batch (decompressed) as the broker
does before storing a produced batch, without building record objects:

    record := length varint | attributes int8 | timestamp_delta varlong | offset_delta varint
              | key_length varint (-1 = null) key | value_length varint (-1 = null) value
              | header_count varint | { key_length varint key value_length varint value }*

Every record must fill exactly its length, and the section must end with the last record.
It returns ``(min_timestamp, max_timestamp, bad_delta)``: the smallest record timestamp
(first_timestamp + timestamp_delta; -1 without records), the largest one but at least -1
(as Kafka computes a batch's max timestamp), and the index of the first record whose offset
delta is not its index (-1 when all are).

This is the pure-Python twin of ``kcodec._cy.segscan``.
"""

from __future__ import annotations

import struct
from typing import Any

from kcodec._py._wire import need, varint, varlong, wrap64
from kcodec._py.crc import crc32c
from kcodec.errors import CorruptDataError

__all__ = ["scan_valid_v2", "scan_records_v2"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1


def _byte_view(buf: Any) -> Any:
    if type(buf) is bytes:
        return buf
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B") if mv.c_contiguous else memoryview(mv.tobytes())
    return mv


def scan_valid_v2(buf: Any, start: int = 0, base_offset: int = 0
                  ) -> tuple[int, int, int, int | None, int | None, int]:
    """Skip the valid v2 batches from ``start``: returns ``(position, batches, records,
    first_offset, last_offset, max_timestamp)`` where ``position`` is where the scan stopped
    (the end of the last valid batch), the offsets are None when no batch was valid, and
    ``max_timestamp`` is -1 then."""
    data = _byte_view(buf)
    end = len(data)
    if not 0 <= start <= end:
        raise ValueError(f"start {start} outside a buffer of {end} bytes")
    if not -_INT64_MAX - 1 <= base_offset <= _INT64_MAX:
        raise ValueError(f"base offset {base_offset} is not an int64")
    top = min(base_offset + _INT32_MAX, _INT64_MAX)
    pos = start
    count = records = 0
    first: int | None = None
    last: int | None = None
    max_ts = -1
    unpack = _HEADER.unpack_from
    while end - pos >= 61:
        (bo, length, _, magic, crc, _, lod, _, ts, _, _, _, n) = unpack(data, pos)
        if length < 49 or length > end - pos - 12 or magic != 2 or n < 0:
            break
        if lod < 0 or bo < base_offset or bo > top - lod:
            break
        if crc32c(data[pos + 21: pos + 12 + length]) != crc:
            break
        count += 1
        records += n
        if first is None:
            first = bo
        last = bo + lod
        if ts > max_ts:
            max_ts = ts
        pos += 12 + length
    return pos, count, records, first, last, max_ts


def _zz(data: Any, pos: int, end: int, kind: str, long: bool = False) -> tuple[int, int]:
    """A zigzag varint (varlong when ``long``): 1- and 2-byte values inline, the rest (and
    every error) through the exact reader."""
    if pos + 1 < end:
        b = data[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        b2 = data[pos + 1]
        if b2 < 0x80:
            u = (b & 0x7F) | (b2 << 7)
            return (u >> 1) ^ -(u & 1), pos + 2
    elif pos < end and data[pos] < 0x80:
        b = data[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    return (varlong if long else varint)(data, pos, end, kind, 0)


def scan_records_v2(buf: Any, count: int, first_timestamp: int) -> tuple[int, int, int]:
    """Check ``count`` records filling ``buf`` (a v2 batch's records section): returns
    ``(min_timestamp, max_timestamp, bad_delta)`` (see the module doc); raises the
    reader's errors."""
    data = _byte_view(buf)
    end = len(data)
    if count < 0:
        raise ValueError(f"record count {count} is negative")
    pos = 0
    min_ts = max_ts = -1
    bad = -1
    for i in range(count):
        length, pos = _zz(data, pos, end, "record length")
        if not 0 <= length <= end - pos:
            need(pos, end, length, "record", 0)
        rend = pos + length
        if rend - pos < 1:
            need(pos, rend, 1, "record attributes", 0)
        pos += 1
        delta, pos = _zz(data, pos, rend, "timestamp delta", True)
        od, pos = _zz(data, pos, rend, "offset delta")
        if od != i and bad < 0:
            bad = i
        ts = wrap64(first_timestamp + delta)
        if ts > max_ts:
            max_ts = ts
        if i == 0 or ts < min_ts:
            min_ts = ts
        n, pos = _zz(data, pos, rend, "record key length")
        if n != -1:
            if not 0 <= n <= rend - pos:
                need(pos, rend, n, "record key", 0)
            pos += n
        n, pos = _zz(data, pos, rend, "record value length")
        if n != -1:
            if not 0 <= n <= rend - pos:
                need(pos, rend, n, "record value", 0)
            pos += n
        headers, pos = _zz(data, pos, rend, "header count")
        if headers < 0:
            raise CorruptDataError(f"negative header count {headers}", pos)
        for _ in range(headers):
            n, pos = _zz(data, pos, rend, "header key length")
            if not 0 <= n <= rend - pos:
                need(pos, rend, n, "header key", 0)
            pos += n
            n, pos = _zz(data, pos, rend, "header value length")
            if n != -1:
                if not 0 <= n <= rend - pos:
                    need(pos, rend, n, "header value", 0)
                pos += n
        if pos != rend:
            raise CorruptDataError(f"record length {length} but its fields took "
                                   f"{length - (rend - pos)} bytes", rend - length)
    if pos != end:
        raise CorruptDataError(f"{end - pos} bytes after the last of {count} records", pos)
    return min_ts, max_ts, bad
