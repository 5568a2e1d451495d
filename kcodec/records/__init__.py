"""Kafka record formats: RecordBatch v2 and the legacy MessageSet v0/v1.

Reading: ``iter_batches(buf)`` walks any records blob (a Fetch response's records field, a
log segment's bytes), mixing magic 0, 1 and 2, and yields ``RecordBatch`` (magic 2) and
``LegacyBatch`` (magic 0/1) objects; iterating a batch yields ``Record`` objects
(``ControlRecord`` in control batches).

    >>> from kcodec.records import RecordBatchBuilder, iter_batches
    >>> b = RecordBatchBuilder()
    >>> b.append(b"k", b"v", [("h", b"1")], timestamp=1700000000000)
    RecordMetadata(offset_delta=0, timestamp=1700000000000, size=13)
    >>> [(r.offset, r.key, r.value, r.headers) for batch in iter_batches(b.build()) for r in batch]
    [(0, b'k', b'v', [('h', b'1')])]

Building: ``RecordBatchBuilder`` (magic 2) and ``MessageSetBuilder`` (magic 0/1).

The names come from the modules of this package, each the face of one twin (``batch``,
``builder``, ``legacy``, ``columns``, ``segscan``), chosen once by ``kcodec._impl`` (see
``kcodec.IMPLEMENTATION``).

    batch.py           reading records blobs: ``iter_batches``, ``RecordBatch``, ``Record``
    legacy.py          MessageSet v0/v1: ``LegacyBatch`` and ``MessageSetBuilder``
    builder.py         building v2 batches: ``RecordBatchBuilder``, ``record_size``, sizes
    header.py          the fixed-size headers of a blob's entries: the owner of their layout
    columns.py         columnar decode: one numpy/Arrow column per field
    columns_encode.py  columnar encode: record batches straight from whole Arrow columns
    segscan.py         scans that build no records: segment recovery, the produce check
    segment.py         log segments: a memory-mapped ``.log`` with ``.index`` and ``.timeindex``
    index.py           segment index files: the offset index and the time index
"""

from __future__ import annotations

from enum import IntEnum

from kcodec.compression import Codec
from kcodec.records.batch import (
    DEFAULT_MAX_DECOMPRESSED,
    BatchIterator,
    ControlRecord,
    Record,
    RecordBatch,
    iter_batches,
    parse_control,
)
from kcodec.records.builder import (
    RecordBatchBuilder,
    RecordMetadata,
    estimate_batch_size,
    record_size,
)
from kcodec.records.columns import BinaryColumn, HeadersColumn, RecordColumns, decode_columns
from kcodec.records.legacy import LegacyBatch, MessageSetBuilder
from kcodec.records.segment import LogSegment, RecoveryResult, TimestampOffset


class TimestampType(IntEnum):
    """``Record.timestamp_type`` / ``batch.timestamp_type`` values."""

    NO_TIMESTAMP = -1   # magic 0
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(IntEnum):
    """``ControlRecord.control_type`` values (the key's type field)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


__all__ = [
    "iter_batches",
    "BatchIterator",
    "RecordBatch",
    "LegacyBatch",
    "Record",
    "ControlRecord",
    "RecordMetadata",
    "RecordBatchBuilder",
    "MessageSetBuilder",
    "TimestampType",
    "ControlType",
    "Codec",
    "DEFAULT_MAX_DECOMPRESSED",
    "record_size",
    "estimate_batch_size",
    "parse_control",
    "decode_columns",
    "RecordColumns",
    "BinaryColumn",
    "HeadersColumn",
    "LogSegment",
    "RecoveryResult",
    "TimestampOffset",
]
