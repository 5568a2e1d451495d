"""Columnar decode of a records blob: every record of every batch, one column per field.

Input: a records blob (a Fetch response's records field, or a log segment's bytes), any mix
of magic 0, 1 and 2 entries (see kcodec.records for their wire layout):

    blob    := entry* [incomplete trailing entry]
    entry   := base_offset int64, length int32, ... (length bytes)      magic byte at +16
    v2      := header (61 bytes) record{record_count}   records compressed when codec != 0
    record  := length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
               key (varint length, -1 = null), value (idem),
               header_count varint, (key: varint length + UTF-8, value: varint length, -1 = null)*

Output (kcodec._columnar.RecordColumns, Arrow memory layout in numpy arrays):

    offset int64, timestamp int64, timestamp_type int8       base + delta (wrapping like int64)
    key, value        binary: offsets int32 (int64 past 2 GiB or with large=True),
                      data uint8, validity bitmap (None when no null)
    headers           list<struct<key: string, value: binary>>
    is_control        bool, only with include_control=True

With layout="spark" (Spark's Arrow layout, see kcodec._columnar): timestamp in microseconds
(milliseconds * 1000, wrapping like int64), timestamp_type int32, binary offsets int32 only
(past 2 GiB: DecodeError), headers null for a record without any.

Rules (the same in both twins, and the same as iterating ``kcodec.records.iter_batches``):
an incomplete trailing entry ends the decode (``consumed`` says where); a complete but
malformed one raises the reader's exception; CRCs are checked unless validate_crc=False;
control batches are skipped unless include_control=True; compressed batches are inflated
at most to max_decompressed_size bytes; legacy timestamps are -1 with timestamp type -1
for magic 0.

This pure-Python twin is the reference: it walks the blob with the record reader and
appends each record. ``kcodec._cy.columns`` decodes v2 batches in C with the same checks.
"""

from __future__ import annotations

from typing import Any

from kcodec import _columnar
from kcodec._columnar import BinaryColumn, HeadersColumn, RecordColumns, check_layout
from kcodec._limits import DEFAULT_MAX_SIZE
from kcodec._py.batch import iter_batches

__all__ = ["decode_columns", "join_values"]

_I32_MAX = (1 << 31) - 1
_wide_at = _I32_MAX   # offsets switch from int32 to int64 past this (tests may lower it)


def _set_wide_limit(limit: Any) -> None:
    """For tests: the largest offset kept in int32 columns (default 2**31 - 1)."""
    global _wide_at
    _wide_at = _I32_MAX if limit is None else min(limit, _I32_MAX)


class _Bin:
    """A growing binary column: value bytes, end offsets, and which values are null."""

    __slots__ = ("data", "ends", "valid", "nulls")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends: list[int] = [0]
        self.valid: list[bool] = []
        self.nulls = 0

    def add(self, v: Any) -> None:
        if v is None:
            self.nulls += 1
            self.valid.append(False)
        else:
            self.data += v
            self.valid.append(True)
        self.ends.append(len(self.data))

    def finish(self, np: Any, large: bool, utf8: bool, nullable: bool = True) -> BinaryColumn:
        wide = large or len(self.data) > _wide_at
        offsets = np.array(self.ends, dtype=np.int64 if wide else np.int32)
        data = np.frombuffer(self.data, dtype=np.uint8)   # the bytearray itself, writable
        validity = None
        if nullable and self.nulls:
            validity = np.packbits(np.array(self.valid, dtype=bool), bitorder="little")
        return BinaryColumn(offsets, data, validity, self.nulls, utf8)


def decode_columns(
    buf: Any,
    *,
    validate_crc: bool = True,
    include_control: bool = False,
    large: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_SIZE,
    layout: str = "kcodec",
) -> RecordColumns:
    """Decode every record of a records blob into columns (see the module docstring)."""
    spark = check_layout(layout, large)
    np = _columnar.numpy()

    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    control: list[bool] = []
    key, value, hkey, hval = _Bin(), _Bin(), _Bin(), _Bin()
    hends = [0]
    batches = 0
    next_offset = None
    it = iter_batches(buf, validate_crc=validate_crc, max_decompressed_size=max_decompressed_size)
    for batch in it:
        batches += 1
        next_offset = batch.next_offset
        is_control = bool(batch.is_control)
        if is_control and not include_control:
            continue
        for rec in batch:
            offsets.append(rec.offset)
            timestamps.append(rec.timestamp)
            types.append(rec.timestamp_type)
            key.add(rec.key)
            value.add(rec.value)
            for hk, hv in rec.headers:
                hkey.add(hk.encode("utf-8"))
                hval.add(hv)
            hends.append(len(hkey.ends) - 1)
            control.append(is_control)
    headers = HeadersColumn(
        np.array(hends, dtype=np.int64 if hends[-1] > _wide_at else np.int32),
        hkey.finish(np, large, True, nullable=False),
        hval.finish(np, large, False),
    )
    ts = np.array(timestamps, dtype=np.int64)
    if spark:
        ts *= 1000      # in place; numpy int64 arithmetic wraps like the compiled twin's
    return RecordColumns(
        np.array(offsets, dtype=np.int64),
        ts,
        np.array(types, dtype=np.int32 if spark else np.int8),
        key.finish(np, large, False),
        value.finish(np, large, False),
        headers,
        np.array(control, dtype=bool) if include_control else None,
        it.consumed,
        batches,
        next_offset,
        layout,
    )


def join_values(offsets: Any, data: Any, end: bytes) -> bytes:
    """The values of a binary column (``offsets``: n + 1 int32 or int64, ``data``: their
    bytes) each followed by ``end``, as one bytes object: a consumer's raw lines."""
    buf = bytes(memoryview(data).cast("B")) if len(data) else b""
    offs = [int(x) for x in offsets]
    n = len(offs) - 1
    if n <= 0:
        return b""
    for i in range(n):
        lo, hi = offs[i], offs[i + 1]
        if lo < 0 or hi < lo or hi > len(buf):
            raise ValueError(f"offsets {lo}..{hi} of value {i} are outside the column's "
                             f"{len(buf)} bytes")
    sep = bytes(end)
    return sep.join([buf[offs[i]:offs[i + 1]] for i in range(n)]) + sep
