"""RecordBatch v2 (magic 2): reading any records blob.

Wire layout (big-endian; varints are zigzag, see kcodec.varint):

    RecordBatch :=
        base_offset int64
        batch_length int32                 bytes after this field
        partition_leader_epoch int32
        magic int8 (= 2)
        crc uint32                         CRC-32C of attributes .. end of batch
        attributes int16                   bits 0-2 codec, 3 timestamp type (1 = log append),
                                           4 transactional, 5 control
        last_offset_delta int32
        first_timestamp int64
        max_timestamp int64
        producer_id int64
        producer_epoch int16
        base_sequence int32
        record_count int32
        records: Record{record_count}      compressed as one block when codec != 0
    Record :=
        length varint                      bytes after this field
        attributes int8
        timestamp_delta varlong
        offset_delta varint
        key_length varint, key bytes       -1 = null
        value_length varint, value bytes   -1 = null
        header_count varint
        Header{header_count} := key_length varint, key utf-8, value_length varint, value

A records blob (a Fetch response's records field, a log segment) is a sequence of batches of
any magic; every one starts with base_offset int64, length int32, and has its magic byte at
offset 16. ``BatchIterator`` walks it; legacy (magic 0/1) entries come from ``legacy``.

Errors: framing problems raise CorruptDataError and end the iteration; a CRC mismatch raises
ChecksumError after the iterator has moved past the batch, so the caller may continue.
Offsets in errors are positions in the input; inside a compressed batch they are positions
in its decompressed records. Building a batch is ``kcodec._py.builder``'s. This is the
pure-Python twin of ``kcodec._cy.batch``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec._py import legacy as _legacy
from kcodec._py._record import ControlRecord, Record, make_control, parse_control
from kcodec._py._wire import as_bytes_view, need, varint, varlong, wrap64
from kcodec._py.compression import decompress
from kcodec._py.crc import crc32, crc32c
from kcodec.errors import ChecksumError, CorruptDataError, DecodeError, TruncatedError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "Record",
    "ControlRecord",
    "RecordBatch",
    "BatchIterator",
    "iter_batches",
    "parse_control",
]

DEFAULT_MAX_DECOMPRESSED = DEFAULT_MAX_SIZE

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
_MIN_LENGTH = HEADER_SIZE - 12
_MIN_RECORD = 7
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class RecordBatch:
    """One v2 batch of a records blob. Iterating it yields Record (or ControlRecord) objects,
    decompressing on demand. ``position`` is its byte offset in the blob, ``size`` its
    length in bytes. The batch keeps a reference to the blob."""

    __slots__ = ("position", "base_offset", "batch_length", "partition_leader_epoch", "magic",
                 "crc", "attributes", "last_offset_delta", "first_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "record_count",
                 "_data", "_max_size", "_validate", "_it")

    # Slot types (set by the reader without __init__; annotations only, for type checkers).
    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    _data: Any
    _max_size: int
    _validate: bool
    _it: Iterator[Record] | None

    @property
    def size(self) -> int:
        """Bytes the batch takes in the buffer, its header included."""
        return self.batch_length + 12

    @property
    def last_offset(self) -> int:
        """The offset of the batch's last record."""
        return wrap64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        """The offset after the batch's last record."""
        return wrap64(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> int:
        """The codec id (``Codec``) of the records section."""
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        """0 create time, 1 log append time."""
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        """True if the batch belongs to a transaction."""
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        """True for a control batch (transaction markers)."""
        return bool(self.attributes & 0x20)

    def computed_crc(self) -> int:
        """CRC-32C of the batch's bytes from its attributes to its end."""
        p = self.position
        return crc32c(self._data[p + 21:p + self.batch_length + 12])

    def validate_crc(self) -> bool:
        """Whether the stored CRC-32C matches the bytes."""
        return self.computed_crc() == self.crc

    def check_crc(self) -> None:
        """Raise ChecksumError (stored and computed values) unless the CRC matches."""
        actual = self.computed_crc()
        if actual != self.crc:
            raise ChecksumError(self.crc, actual, self.position, "record batch CRC-32C")

    def records_data(self) -> bytes:
        """The records section as bytes, decompressed (bounded by the iterator's limit)."""
        p = self.position
        raw = self._data[p + HEADER_SIZE:p + self.batch_length + 12]
        codec = self.attributes & 0x07
        if codec == 0:
            return bytes(raw)
        return decompress(codec, raw, self._max_size)

    def records(self) -> list[Record]:
        """Every record of the batch, as a list."""
        return list(self.__iter__())

    def __iter__(self) -> Iterator[Record]:
        """An iterator decoding one record per step (decompressing first if needed)."""
        p = self.position
        end = p + self.batch_length + 12
        codec = self.attributes & 0x07
        if codec == 0:
            data = self._data
            if type(data) is not bytes:
                data = bytes(data[p + HEADER_SIZE:end])
                pos, end, base = 0, len(data), p + HEADER_SIZE
            else:
                pos, base = p + HEADER_SIZE, 0
        else:
            data = decompress(codec, self._data[p + HEADER_SIZE:end], self._max_size)
            pos, end, base = 0, len(data), 0
        count = self.record_count
        if count > (end - pos) // _MIN_RECORD:
            raise CorruptDataError(f"record count {count} impossible in {end - pos} bytes",
                                   pos + base)
        return _iter_records(self, data, pos, end, base)

    def __next__(self) -> Record:
        """The next record of one iteration kept by the batch itself, for callers that use
        the batch as an iterator (``next(batch)``); ``iter(batch)`` always starts afresh."""
        it = self._it
        if it is None:
            it = self._it = self.__iter__()
        return next(it)

    @staticmethod
    def from_bytes(buf: Any, *, validate_crc: bool = True,
                   max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED) -> RecordBatch:
        """The one v2 batch that ``buf`` holds, exactly (TruncatedError when it is cut
        short, CorruptDataError for another magic or bytes after it)."""
        return single_batch(buf, validate_crc, max_decompressed_size, True)

    def __repr__(self) -> str:
        return (f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, count={self.record_count}, "
                f"magic=2, compression={self.compression}, size={self.size})")


class _Unusual(Exception):
    """The quick record reader met something it does not handle: read the record exactly.

    Raised as the class, a new instance each time: raising one shared instance would chain
    every raise's frames onto its ``__traceback__`` for good, keeping each buffer read (a
    segment's mapped file too) alive for the life of the process."""


def _iter_records(batch: RecordBatch, data: Any, pos: int, end: int,
                  base: int) -> Iterator[Record]:
    """Decode ``batch.record_count`` records from data[pos:end] (errors at position + base).

    Each record is read quickly first (_quick_record: varints of one or two bytes, the
    usual fields); on anything else it is read again by _read_record, which checks every
    field exactly as the compiled twin does and raises its error.
    """
    count = batch.record_count
    base_offset = batch.base_offset
    first_ts = batch.first_timestamp
    ts_type = (batch.attributes >> 3) & 1
    log_append = batch.max_timestamp if ts_type else None
    control = batch.attributes & 0x20
    for _ in range(count):
        start = pos
        try:
            rec, pos = _quick_record(data, pos, end, base_offset, first_ts, ts_type, log_append)
        except Exception:  # unusual (or malformed): the exact reader raises the exact error
            rec, pos = _read_record(data, pos, end, base, base_offset, first_ts, ts_type,
                                    log_append)
        if control:
            rec = make_control(rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value,
                               rec.headers, rec.attributes, start + base, pos - start)
        yield rec
    if pos != end:
        raise CorruptDataError(f"{end - pos} bytes left after the last of {count} records",
                               pos + base)


def _quick_record(data: bytes, pos: int, end: int, base_offset: int, first_ts: int,
                  ts_type: int, log_append: int | None) -> tuple[Record, int]:
    """The record at ``pos`` when every varint of it has one or two bytes and every length
    fits; anything else raises (_Unusual, IndexError...) for _read_record to read.

    Each varint is read in line, the one-byte form first: a function call per varint (ten
    a record) cost a sixth of the whole decode."""
    b = data[pos]
    if b < 0x80:
        length, i = (b >> 1) ^ -(b & 1), pos + 1
    else:
        c = data[pos + 1]
        if c >= 0x80:
            raise _Unusual
        b = (b & 0x7F) | (c << 7)
        length, i = (b >> 1) ^ -(b & 1), pos + 2
    rec_end = i + length
    if length < 0 or rec_end > end:
        raise _Unusual
    attributes = data[i]
    if attributes > 127:
        attributes -= 256
    b = data[i + 1]
    if b < 0x80:
        tsd, i = (b >> 1) ^ -(b & 1), i + 2
    else:
        c = data[i + 2]
        if c >= 0x80:
            raise _Unusual
        b = (b & 0x7F) | (c << 7)
        tsd, i = (b >> 1) ^ -(b & 1), i + 3
    b = data[i]
    if b < 0x80:
        od, i = (b >> 1) ^ -(b & 1), i + 1
    else:
        c = data[i + 1]
        if c >= 0x80:
            raise _Unusual
        b = (b & 0x7F) | (c << 7)
        od, i = (b >> 1) ^ -(b & 1), i + 2
    b = data[i]
    if b < 0x80:
        n, i = (b >> 1) ^ -(b & 1), i + 1
    else:
        c = data[i + 1]
        if c >= 0x80:
            raise _Unusual
        b = (b & 0x7F) | (c << 7)
        n, i = (b >> 1) ^ -(b & 1), i + 2
    key = None
    if n >= 0:
        key = data[i:i + n]
        i += n
    elif n != -1:
        raise _Unusual
    b = data[i]
    if b < 0x80:
        n, i = (b >> 1) ^ -(b & 1), i + 1
    else:
        c = data[i + 1]
        if c >= 0x80:
            raise _Unusual
        b = (b & 0x7F) | (c << 7)
        n, i = (b >> 1) ^ -(b & 1), i + 2
    value = None
    if n >= 0:
        value = data[i:i + n]
        i += n
    elif n != -1:
        raise _Unusual
    b = data[i]
    if b < 0x80:
        hc, i = (b >> 1) ^ -(b & 1), i + 1
    else:
        c = data[i + 1]
        if c >= 0x80:
            raise _Unusual
        b = (b & 0x7F) | (c << 7)
        hc, i = (b >> 1) ^ -(b & 1), i + 2
    headers: list[tuple[str, bytes | None]] = []
    if hc:
        if hc < 0 or hc > (rec_end - i) // 2:
            raise _Unusual
        for _ in range(hc):
            b = data[i]
            if b < 0x80:
                n, i = (b >> 1) ^ -(b & 1), i + 1
            else:
                c = data[i + 1]
                if c >= 0x80:
                    raise _Unusual
                b = (b & 0x7F) | (c << 7)
                n, i = (b >> 1) ^ -(b & 1), i + 2
            if n < 0:
                raise _Unusual
            hk = data[i:i + n].decode()
            i += n
            b = data[i]
            if b < 0x80:
                n, i = (b >> 1) ^ -(b & 1), i + 1
            else:
                c = data[i + 1]
                if c >= 0x80:
                    raise _Unusual
                b = (b & 0x7F) | (c << 7)
                n, i = (b >> 1) ^ -(b & 1), i + 2
            if n >= 0:
                headers.append((hk, data[i:i + n]))
                i += n
            elif n == -1:
                headers.append((hk, None))
            else:
                raise _Unusual
    if i != rec_end:
        raise _Unusual
    offset = base_offset + od
    if offset > _I64_MAX or offset < _I64_MIN:
        offset = wrap64(offset)
    if log_append is None:
        ts = first_ts + tsd
        if ts > _I64_MAX or ts < _I64_MIN:
            ts = wrap64(ts)
    else:
        ts = log_append
    return Record(offset, ts, ts_type, key, value, headers, attributes, i - pos), i


def _read_record(data: Any, pos: int, end: int, base: int, base_offset: int, first_ts: int,
                 ts_type: int, log_append: int | None) -> tuple[Record, int]:
    """Decode the record at ``pos``: it and the position after it. Every length is checked
    against the bytes left before it is used, in the order the compiled twin checks."""
    start = pos
    length, pos = varint(data, pos, end, "record length", base)
    need(pos, end, length, "record", base)
    body = pos
    rec_end = pos + length
    need(pos, rec_end, 1, "record attributes", base)
    attributes = data[pos]
    if attributes > 127:
        attributes -= 256
    pos += 1
    tsd, pos = varlong(data, pos, rec_end, "timestamp delta", base)
    od, pos = varint(data, pos, rec_end, "offset delta", base)
    n, pos = varint(data, pos, rec_end, "key length", base)
    key = None
    if n != -1:
        need(pos, rec_end, n, "record key", base)
        key = bytes(data[pos:pos + n])
        pos += n
    n, pos = varint(data, pos, rec_end, "value length", base)
    value = None
    if n != -1:
        need(pos, rec_end, n, "record value", base)
        value = bytes(data[pos:pos + n])
        pos += n
    hc, pos = varint(data, pos, rec_end, "header count", base)
    if hc < 0:
        raise CorruptDataError(f"negative header count {hc}", pos + base)
    if hc > (rec_end - pos) // 2:
        raise CorruptDataError(f"header count {hc} impossible in {rec_end - pos} bytes",
                               pos + base)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(hc):
        n, pos = varint(data, pos, rec_end, "header key length", base)
        need(pos, rec_end, n, "header key", base)
        try:
            hk = bytes(data[pos:pos + n]).decode()
        except UnicodeDecodeError:
            raise CorruptDataError("header key is not valid UTF-8", pos + base) from None
        pos += n
        n, pos = varint(data, pos, rec_end, "header value length", base)
        hv = None
        if n != -1:
            need(pos, rec_end, n, "header value", base)
            hv = bytes(data[pos:pos + n])
            pos += n
        headers.append((hk, hv))
    if pos != rec_end:
        raise CorruptDataError(f"record length {length} but its fields took {pos - body} bytes",
                               body + base)
    ts = log_append if log_append is not None else wrap64(first_ts + tsd)
    return Record(wrap64(base_offset + od), ts, ts_type, key, value, headers, attributes,
                  pos - start), pos


class BatchIterator:
    """Iterates the batches of a records blob (any mix of magic 0, 1 and 2).

    ``consumed`` is the number of bytes (from the start of ``buf``) covered by the batches
    yielded or skipped so far; ``incomplete`` becomes True when iteration stopped at a
    trailing batch that is cut short (normal at the end of a Fetch response).

    A complete but malformed entry raises CorruptDataError and ends the iteration (the next
    call raises StopIteration; ``consumed`` stays at the bad entry). A CRC mismatch raises
    ChecksumError after moving past the batch: calling ``next()`` again continues with the
    following batch.
    """

    __slots__ = ("consumed", "incomplete", "_data", "_end", "_validate", "_max_size", "_done")

    def __init__(self, buf: Any, validate_crc: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED, start: int = 0) -> None:
        data = as_bytes_view(buf)
        end = len(data)
        if start < 0 or start > end:
            raise ValueError(f"start {start} outside a buffer of {end} bytes")
        self._data = data
        self._end = end
        self._validate = bool(validate_crc)
        self._max_size = check_max_size(max_decompressed_size)
        self.consumed = start
        self.incomplete = False
        self._done = False

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        data = self._data
        pos = self.consumed
        rem = self._end - pos
        if rem < 12:
            self._done = True
            self.incomplete = rem > 0
            raise StopIteration
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if length < 14:
            self._done = True
            raise CorruptDataError(f"batch length {length} below the minimum of 14", pos + 8)
        if length > rem - 12:
            self._done = True
            self.incomplete = True
            raise StopIteration
        magic = data[pos + 16]
        nxt = pos + length + 12
        if magic == 2:
            if length < _MIN_LENGTH:
                self._done = True
                raise CorruptDataError(
                    f"batch length {length} below the minimum of {_MIN_LENGTH} for magic 2",
                    pos + 8)
            if self._validate:
                stored = int.from_bytes(data[pos + 17:pos + 21], "big")
                actual = crc32c(data[pos + 21:nxt])
                if actual != stored:
                    self.consumed = nxt
                    raise ChecksumError(stored, actual, pos, "record batch CRC-32C")
            b = RecordBatch.__new__(RecordBatch)
            (b.base_offset, b.batch_length, b.partition_leader_epoch, b.magic, b.crc,
             b.attributes, b.last_offset_delta, b.first_timestamp, b.max_timestamp,
             b.producer_id, b.producer_epoch, b.base_sequence,
             b.record_count) = _HEADER.unpack_from(data, pos)
            if b.record_count < 0:
                self._done = True
                raise CorruptDataError(f"negative record count {b.record_count}", pos + 57)
            b.position = pos
            b._data = data
            b._max_size = self._max_size
            b._validate = self._validate
            b._it = None
            self.consumed = nxt
            return b
        if magic == 0 or magic == 1:
            minimum = 14 if magic == 0 else 22
            if length < minimum:
                self._done = True
                raise CorruptDataError(
                    f"message length {length} below the minimum of {minimum} for magic {magic}",
                    pos + 8)
            if self._validate:
                stored = int.from_bytes(data[pos + 12:pos + 16], "big")
                actual = crc32(data[pos + 16:nxt])
                if actual != stored:
                    self.consumed = nxt
                    raise ChecksumError(stored, actual, pos, "message CRC-32")
            try:
                m = _legacy.message_at(data, pos, self._validate, self._max_size)
            except DecodeError:
                self._done = True
                raise
            self.consumed = nxt
            return m
        self._done = True
        raise CorruptDataError(f"unknown magic byte {magic}", pos + 16)


def single_batch(buf: Any, validate_crc: bool, max_size: int, v2: bool) -> Any:
    """The one batch (v2 when ``v2``, else one legacy message) that ``buf`` holds, exactly."""
    it = BatchIterator(buf, validate_crc, max_size)
    data, n = it._data, it._end
    if n >= 17 and (data[16] == 2) != v2:
        raise CorruptDataError(f"magic byte {data[16]} where a "
                               f"{'v2 batch' if v2 else 'legacy message'} was expected", 16)
    batch = next(it, None)
    if batch is None:
        want = 12 if n < 12 else 12 + int.from_bytes(data[8:12], "big", signed=True)
        raise TruncatedError(want, 0, n, "batch")
    if it.consumed != n:
        raise CorruptDataError(f"{n - it.consumed} bytes after the batch", it.consumed)
    return batch


def iter_batches(buf: Any, *, validate_crc: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED,
                 start: int = 0) -> BatchIterator:
    """Iterate the batches of a records blob from byte ``start``; see BatchIterator."""
    return BatchIterator(buf, validate_crc, max_decompressed_size, start)
