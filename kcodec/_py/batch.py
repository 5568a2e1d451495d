"""RecordBatch v2 (magic 2): reading any records blob, and building v2 batches.

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
in its decompressed records. This is the pure-Python twin of ``kcodec._cy.batch``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator
from typing import Any

from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec._py import legacy as _legacy
from kcodec._py._record import ControlRecord, Record, RecordMetadata, make_control, parse_control
from kcodec._py._wire import (
    as_bytes_view,
    bytes_like,
    check_int,
    need,
    uvar,
    uvar_bytes,
    varint,
    varlong,
    wrap64,
)
from kcodec._py.compression import compress, decompress
from kcodec._py.crc import crc32, crc32c
from kcodec.errors import (
    ChecksumError,
    CorruptDataError,
    DecodeError,
    EncodeError,
    EncodeTypeError,
    TruncatedError,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "Record",
    "ControlRecord",
    "RecordMetadata",
    "RecordBatch",
    "BatchIterator",
    "iter_batches",
    "RecordBatchBuilder",
    "parse_control",
    "record_size",
    "estimate_batch_size",
]

DEFAULT_MAX_DECOMPRESSED = DEFAULT_MAX_SIZE

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
_MIN_LENGTH = HEADER_SIZE - 12
_MIN_RECORD = 7
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I16_MIN, _I16_MAX = -(1 << 15), (1 << 15) - 1
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


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
        return self.batch_length + 12

    @property
    def last_offset(self) -> int:
        return wrap64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return wrap64(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
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
    """The optimistic record reader met something it does not handle: re-read exactly.

    Raised as the class, a new instance each time: raising one shared instance would chain
    every raise's frames onto its ``__traceback__`` for good, keeping each buffer read (a
    segment's mapped file too) alive for the life of the process."""


def _iter_records(batch: RecordBatch, data: bytes, pos: int, end: int,
                  base: int) -> Iterator[Record]:
    """Decode ``b.record_count`` records from data[pos:end] (errors at position + base).

    Each record is read optimistically inline (varints of 1-2 bytes in place); on anything
    unusual it is read again by ``_exact_record``, which checks every field exactly as the
    compiled twin does and raises its error.
    """
    count = batch.record_count
    base_offset = batch.base_offset
    first_ts = batch.first_timestamp
    attrs = batch.attributes
    ts_type = (attrs >> 3) & 1
    log_append = batch.max_timestamp if ts_type else None
    control = attrs & 0x20
    for _ in range(count):
        rstart = pos
        try:
            i = pos
            b = data[i]
            if b < 0x80:
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    i += 2
                else:
                    b, i = uvar(data, i, end, 5, 32, "", 0)
            length = (b >> 1) ^ -(b & 1)
            rec_end = i + length
            if length < 0 or rec_end > end:
                raise _Unusual
            attributes = data[i]
            i += 1
            b = data[i]
            if b < 0x80:
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    i += 2
                else:
                    b, i = uvar(data, i, end, 10, 64, "", 0)
            tsd = (b >> 1) ^ -(b & 1)
            b = data[i]
            if b < 0x80:
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    i += 2
                else:
                    b, i = uvar(data, i, end, 5, 32, "", 0)
            od = (b >> 1) ^ -(b & 1)
            b = data[i]
            if b < 0x80:
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    i += 2
                else:
                    b, i = uvar(data, i, end, 5, 32, "", 0)
            n = (b >> 1) ^ -(b & 1)
            if n >= 0:
                key = data[i:i + n]
                i += n
            elif n == -1:
                key = None
            else:
                raise _Unusual
            b = data[i]
            if b < 0x80:
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    i += 2
                else:
                    b, i = uvar(data, i, end, 5, 32, "", 0)
            n = (b >> 1) ^ -(b & 1)
            if n >= 0:
                value = data[i:i + n]
                i += n
            elif n == -1:
                value = None
            else:
                raise _Unusual
            b = data[i]
            if b < 0x80:
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    i += 2
                else:
                    b, i = uvar(data, i, end, 5, 32, "", 0)
            hc = (b >> 1) ^ -(b & 1)
            headers: list[tuple[str, bytes | None]] = []
            if hc:
                if hc < 0 or hc > (rec_end - i) // 2:
                    raise _Unusual
                for _ in range(hc):
                    b = data[i]
                    if b < 0x80:
                        i += 1
                    else:
                        c = data[i + 1]
                        if c < 0x80:
                            b = (b & 0x7F) | (c << 7)
                            i += 2
                        else:
                            b, i = uvar(data, i, end, 5, 32, "", 0)
                    n = (b >> 1) ^ -(b & 1)
                    if n < 0:
                        raise _Unusual
                    hk = data[i:i + n].decode()
                    i += n
                    b = data[i]
                    if b < 0x80:
                        i += 1
                    else:
                        c = data[i + 1]
                        if c < 0x80:
                            b = (b & 0x7F) | (c << 7)
                            i += 2
                        else:
                            b, i = uvar(data, i, end, 5, 32, "", 0)
                    n = (b >> 1) ^ -(b & 1)
                    if n >= 0:
                        headers.append((hk, data[i:i + n]))
                        i += n
                    elif n == -1:
                        headers.append((hk, None))
                    else:
                        raise _Unusual
            if i != rec_end:
                raise _Unusual
            if attributes > 127:
                attributes -= 256
            offset = base_offset + od
            if offset > _I64_MAX or offset < _I64_MIN:
                offset = wrap64(offset)
            if log_append is None:
                ts = first_ts + tsd
                if ts > _I64_MAX or ts < _I64_MIN:
                    ts = wrap64(ts)
            else:
                ts = log_append
            rec = Record(offset, ts, ts_type, key, value, headers, attributes, i - rstart)
            pos = i
        except Exception:  # unusual (or malformed): the exact reader raises the exact error
            rec, pos = _exact_record(data, rstart, end, base, base_offset, first_ts, ts_type,
                                     log_append)
        if control:
            rec = make_control(rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value,
                               rec.headers, rec.attributes, rstart + base, pos - rstart)
        yield rec
    if pos != end:
        raise CorruptDataError(f"{end - pos} bytes left after the last of {count} records",
                               pos + base)


def _exact_record(data: Any, pos: int, end: int, base: int, base_offset: int, first_ts: int,
                  ts_type: int, log_append: int | None) -> tuple[Record, int]:
    """Decode one record checking every field exactly as the compiled twin does."""
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


class RecordBatchBuilder:
    """Builds one v2 record batch.

    ``append`` returns a RecordMetadata, or None when the record would take the batch past
    ``max_size`` bytes (the first record is always accepted). ``build`` returns the batch
    bytes with the CRC-32C filled in; the records are compressed with ``compression``
    (a codec id 0-4) at ``compression_level`` (None: the codec's default).
    """

    __slots__ = ("_codec", "_level", "_base_offset", "_ts_type", "_producer_id",
                 "_producer_epoch", "_base_sequence", "_transactional", "_control",
                 "_leader_epoch", "_max_size", "_buf", "_count", "_last_delta", "_first_ts",
                 "_max_ts", "_only_smaller", "_meta_cls")

    def __init__(self, *, compression: int = 0, compression_level: int | None = None,
                 base_offset: int = 0, timestamp_type: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 is_transactional: bool = False, is_control: bool = False,
                 partition_leader_epoch: int = -1, max_size: int = 1048576,
                 compress_only_if_smaller: bool = False,
                 metadata_class: type | None = None) -> None:
        self._only_smaller = bool(compress_only_if_smaller)
        if metadata_class is not None and not (isinstance(metadata_class, type) and
                                               issubclass(metadata_class, RecordMetadata)):
            raise EncodeTypeError("metadata_class must be a subclass of RecordMetadata")
        self._meta_cls = metadata_class
        self._codec = check_int(compression, 0, 4, "compression codec")
        if compression_level is not None:
            compress(self._codec, b"", compression_level)  # EncodeError for a bad level
        self._level = compression_level
        self._base_offset = check_int(base_offset, _I64_MIN, _I64_MAX, "base offset")
        self._ts_type = check_int(timestamp_type, 0, 1, "timestamp type")
        self._producer_id = check_int(producer_id, _I64_MIN, _I64_MAX, "producer id")
        self._producer_epoch = check_int(producer_epoch, _I16_MIN, _I16_MAX, "producer epoch")
        self._base_sequence = check_int(base_sequence, _I32_MIN, _I32_MAX, "base sequence")
        self._transactional = bool(is_transactional)
        self._control = bool(is_control)
        self._leader_epoch = check_int(partition_leader_epoch, _I32_MIN, _I32_MAX,
                                       "partition leader epoch")
        self._max_size = check_int(max_size, 0, _I32_MAX, "max size")
        self._buf = bytearray()
        self._count = 0
        self._last_delta = -1
        self._first_ts = -1
        self._max_ts = -1

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        """Bytes the batch takes so far, before compression."""
        return HEADER_SIZE + len(self._buf)

    @property
    def first_timestamp(self) -> int | None:
        """The first record's timestamp (None before the first append)."""
        return self._first_ts if self._count else None

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def is_transactional(self) -> bool:
        return self._transactional

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool | None = None) -> None:
        """Set the producer id, epoch, base sequence (and, unless None, the transactional
        flag) written by ``build``: allowed at any time before it, records appended or not."""
        pid = check_int(producer_id, _I64_MIN, _I64_MAX, "producer id")
        epoch = check_int(producer_epoch, _I16_MIN, _I16_MAX, "producer epoch")
        seq = check_int(base_sequence, _I32_MIN, _I32_MAX, "base sequence")
        self._producer_id, self._producer_epoch, self._base_sequence = pid, epoch, seq
        if is_transactional is not None:
            self._transactional = bool(is_transactional)

    def append(self, key: Any, value: Any, headers: Iterable[Any] | None = None,
               timestamp: int | None = None,
               offset_delta: int | None = None) -> RecordMetadata | None:
        """Add a record; its metadata, or None if the batch is full."""
        if offset_delta is None:
            od = self._last_delta + 1
            if od > _I32_MAX:
                raise EncodeError(f"offset delta {od} out of range ({_I32_MIN}..{_I32_MAX})")
        else:
            od = check_int(offset_delta, _I32_MIN, _I32_MAX, "offset delta")
            if od <= self._last_delta:
                raise EncodeError(f"offset delta {od} not above the previous {self._last_delta}")
        if timestamp is None:
            ts = int(time.time() * 1000)
        elif type(timestamp) is int and _I64_MIN <= timestamp <= _I64_MAX:
            ts = timestamp
        else:
            ts = check_int(timestamp, _I64_MIN, _I64_MAX, "timestamp")
        if key is not None and type(key) is not bytes:
            key = bytes_like(key, "record key")
        if value is not None and type(value) is not bytes:
            value = bytes_like(value, "record value")
        first_ts = ts if self._count == 0 else self._first_ts
        delta = ts - first_ts
        if delta > _I64_MAX or delta < _I64_MIN:
            raise EncodeError(f"timestamp delta {delta} out of range ({_I64_MIN}..{_I64_MAX})")
        V = _VARINTS
        u = ((delta << 1) ^ (delta >> 63)) & 0xFFFFFFFFFFFFFFFF
        parts = [b"\x00", V[u] if u < _NV else uvar_bytes(u)]
        append = parts.append
        u = ((od << 1) ^ (od >> 31)) & 0xFFFFFFFF
        append(V[u] if u < _NV else uvar_bytes(u))
        if key is None:
            append(b"\x01")
        else:
            u = _zz_len(len(key), "record key")
            append(V[u] if u < _NV else uvar_bytes(u))
            append(key)
        if value is None:
            append(b"\x01")
        else:
            u = _zz_len(len(value), "record value")
            append(V[u] if u < _NV else uvar_bytes(u))
            append(value)
        if headers is None:
            append(b"\x00")
        else:
            hs = headers if type(headers) is list or type(headers) is tuple else list(headers)
            u = _zz_len(len(hs), "header count")
            append(V[u] if u < _NV else uvar_bytes(u))
            for h in hs:
                if type(h) is tuple and len(h) == 2:
                    hk, hv = h
                else:
                    try:
                        hk, hv = h
                    except (TypeError, ValueError):
                        raise EncodeError("a header must be a (key, value) pair") from None
                if type(hk) is str:
                    try:
                        hk = hk.encode()
                    except UnicodeEncodeError:
                        raise EncodeError("header key cannot be encoded as UTF-8") from None
                elif isinstance(hk, str):
                    try:
                        hk = str.encode(hk)
                    except UnicodeEncodeError:
                        raise EncodeError("header key cannot be encoded as UTF-8") from None
                elif isinstance(hk, (bytes, bytearray)):
                    hk = bytes(hk)
                else:
                    raise EncodeError(f"header key must be str or bytes, not {type(hk).__name__}")
                u = _zz_len(len(hk), "header key")
                append(V[u] if u < _NV else uvar_bytes(u))
                append(hk)
                if hv is None:
                    append(b"\x01")
                else:
                    if type(hv) is not bytes:
                        hv = bytes_like(hv, "header value")
                    u = _zz_len(len(hv), "header value")
                    append(V[u] if u < _NV else uvar_bytes(u))
                    append(hv)
        body = b"".join(parts)
        n = len(body)
        if n > _I32_MAX:
            raise EncodeError(f"record of {n} bytes too large")
        u = n << 1
        head = V[u] if u < _NV else uvar_bytes(u)
        size = len(head) + n
        buf = self._buf
        if self._count and HEADER_SIZE + len(buf) + size > self._max_size:
            return None
        buf += head
        buf += body
        if self._count == 0:
            self._first_ts = ts
            self._max_ts = ts
        elif ts > self._max_ts:
            self._max_ts = ts
        self._count += 1
        self._last_delta = od
        if self._meta_cls is not None:
            return self._meta_cls(od, ts, size)
        return RecordMetadata(od, ts, size)

    def add(self, key: Any, value: Any, headers: Iterable[Any] | None, timestamp: int | None,
            timestamps: list[int]) -> int:
        """The producer's append: as ``append`` (the next offset delta), but the record's
        timestamp goes on the end of ``timestamps`` and its size in bytes is returned (0:
        the batch is full, nothing added). No metadata object is made."""
        if type(timestamps) is not list:
            raise TypeError(f"timestamps must be a list, not {type(timestamps).__name__}")
        meta = self.append(key, value, headers, timestamp)
        if meta is None:
            return 0
        timestamps.append(meta.timestamp)
        return meta.size

    def append_with_offset(self, offset: int, timestamp: int | None, key: Any, value: Any,
                           headers: Iterable[Any] | None = None) -> RecordMetadata | None:
        """``append`` in the argument order of Java's appendWithOffset (and of the Python
        clients' builders): ``offset`` is absolute, its delta from ``base_offset`` is used."""
        if type(offset) is not int:
            check_int(offset, _I64_MIN, _I64_MAX, "offset")
        return RecordBatchBuilder.append(self, key, value, headers, timestamp,
                                         offset - self._base_offset)

    def append_control(self, control_type: int, coordinator_epoch: int = 0,
                       timestamp: int | None = None) -> RecordMetadata | None:
        """Add a transaction marker (control_type 0 abort, 1 commit) to a control batch."""
        if not self._control:
            raise EncodeError("append_control needs a builder made with is_control=True")
        ct = check_int(control_type, _I16_MIN, _I16_MAX, "control type")
        ce = check_int(coordinator_epoch, _I32_MIN, _I32_MAX, "coordinator epoch")
        return self.append(_CONTROL_KEY.pack(0, ct), _MARKER_VALUE.pack(0, ce), None, timestamp)

    def build(self, *, as_bytearray: bool = False) -> Any:
        """The batch bytes, records compressed and the CRC-32C filled in (a new bytearray
        instead of bytes with ``as_bytearray``). With ``compress_only_if_smaller`` the records
        stay uncompressed (codec 0 in the attributes) unless compressing made them smaller."""
        codec = self._codec
        payload: Any = self._buf
        if codec:
            payload = compress(codec, bytes(self._buf), self._level)
            if self._only_smaller and len(payload) >= len(self._buf):
                codec, payload = 0, self._buf
        attrs = codec | (self._ts_type << 3)
        if self._transactional:
            attrs |= 0x10
        if self._control:
            attrs |= 0x20
        length = HEADER_SIZE - 12 + len(payload)
        if length > _I32_MAX:
            raise EncodeError(f"batch of {length + 12} bytes too large")
        out = bytearray(_HEADER.pack(
            self._base_offset, length, self._leader_epoch, 2, 0, attrs, self._last_delta,
            self._first_ts, self._max_ts, self._producer_id, self._producer_epoch,
            self._base_sequence, self._count))
        out += payload
        struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
        return out if as_bytearray else bytes(out)


_NV = 1 << 14
_VARINTS = [uvar_bytes(u) for u in range(_NV)]  # every 1- and 2-byte varint, precomputed


def _zz_len(n: int, what: str) -> int:
    if n > _I32_MAX:
        raise EncodeError(f"{what} of {n} bytes too long")
    return (n << 1) & 0xFFFFFFFF


def _uvar_size(u: int) -> int:
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def _field_size(b: Any, what: str) -> int:
    if b is None:
        return 1
    n = len(b)
    return _uvar_size(_zz_len(n, what)) + n


def _body_size(key: Any, value: Any, headers: Any) -> int:
    size = _field_size(key, "record key") + _field_size(value, "record value")
    if headers is None:
        return size + 1
    hs = headers if type(headers) is list or type(headers) is tuple else list(headers)
    size += _uvar_size(_zz_len(len(hs), "header count"))
    for hk, hv in hs:
        n = len(hk.encode() if isinstance(hk, str) else hk)
        size += _uvar_size(_zz_len(n, "header key")) + n + _field_size(hv, "header value")
    return size


def record_size(key: Any, value: Any, headers: Iterable[Any] | None = None,
                offset_delta: int = 0, timestamp_delta: int = 0) -> int:
    """Bytes a v2 record takes in its batch (length varint included): what ``append`` would
    report as its size, without building it."""
    od = check_int(offset_delta, _I32_MIN, _I32_MAX, "offset delta")
    td = check_int(timestamp_delta, _I64_MIN, _I64_MAX, "timestamp delta")
    body = (1 + _uvar_size(((td << 1) ^ (td >> 63)) & 0xFFFFFFFFFFFFFFFF)
            + _uvar_size(((od << 1) ^ (od >> 31)) & 0xFFFFFFFF) + _body_size(key, value, headers))
    return _uvar_size(body << 1) + body


def estimate_batch_size(key: Any, value: Any, headers: Iterable[Any] | None = None) -> int:
    """An upper bound of the bytes of an uncompressed v2 batch holding this one record: the
    batch header, the largest record overhead (length 5, attributes 1, timestamp delta 10,
    offset delta 5 bytes) and the key, value and headers."""
    return HEADER_SIZE + 21 + _body_size(key, value, headers)
