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

This is the pure-Python twin of ``kcodec._cy.segscan``.
"""

from __future__ import annotations

import struct
from typing import Any

from kcodec.crc import crc32c

__all__ = ["scan_valid_v2"]

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
