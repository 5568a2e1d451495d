"""Columnar share consumption: a fetched partition's records as ``RecordColumns``
(``kcodec.records.decode_columns``, numpy arrays and Arrow-style binary columns) instead
of one object per record, for ``poll_columns``.

A delivery's batches may hold offsets the broker did not acquire for this member (a batch
cut by a strict record limit, records released to others); each acquired range becomes
its own slice of the columns (buffers shared, not copied), with the range's delivery
count. Acquired offsets without a row (compacted away) are reported as gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcodec.client.structs import TopicPartition

__all__ = ["ShareColumns", "columns_of"]


@dataclass
class ShareColumns:
    """Rows of one partition delivered ``delivery_count`` times: ``columns`` is a
    ``RecordColumns`` (``offset``, ``timestamp``, ``key``, ``value``, ``headers`` ...)."""

    topic: str
    partition: int
    columns: Any
    delivery_count: int

    def __len__(self) -> int:
        return len(self.columns)


def _slice(cols: Any, start: int, end: int) -> Any:
    """Rows ``start`` to ``end`` (exclusive) of ``cols``, sharing its buffers."""
    import numpy as np

    from kcodec.records import BinaryColumn, HeadersColumn, RecordColumns

    if start == 0 and end == len(cols):
        return cols

    def binary(c: Any) -> Any:
        validity = None
        nulls = 0
        if c.validity is not None:
            valid = c.valid[start:end]
            nulls = int(len(valid) - valid.sum())
            validity = np.packbits(valid, bitorder="little") if nulls else None
        return BinaryColumn(c.offsets[start:end + 1], c.data, validity, nulls, c.utf8)

    h = cols.headers
    return RecordColumns(cols.offset[start:end], cols.timestamp[start:end],
                         cols.timestamp_type[start:end], binary(cols.key), binary(cols.value),
                         HeadersColumn(h.offsets[start:end + 1], h.keys, h.values),
                         None if cols.is_control is None else cols.is_control[start:end],
                         cols.consumed, cols.batch_count, cols.next_offset)


def columns_of(tp: TopicPartition, data: bytes, ranges: list[tuple[int, int, int]],
               check: bool) -> tuple[list[ShareColumns], list[int]]:
    """(the acquired rows of ``data`` by range, the acquired offsets that have no row)."""
    import numpy as np

    from kcodec.records import decode_columns

    cols = decode_columns(data, validate_crc=check)
    offsets = cols.offset
    out: list[ShareColumns] = []
    gaps: list[int] = []
    for first, last, count in sorted(ranges):
        start = int(np.searchsorted(offsets, first, "left"))
        end = int(np.searchsorted(offsets, last, "right"))
        if end - start != last - first + 1:
            have = set(offsets[start:end].tolist())
            gaps += [o for o in range(first, last + 1) if o not in have]
        if end > start:
            out.append(ShareColumns(tp.topic, tp.partition, _slice(cols, start, end), count))
    return out, gaps
