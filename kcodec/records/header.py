"""The fixed-size headers of a records blob's entries: the one place that knows their layout.

Every entry of a records blob (a Fetch or Produce records field, a log segment) starts with
the same 17 bytes, whatever its magic::

    Entry :=
        base_offset             int64    @0    (legacy: the message's offset)
        length                  int32    @8    bytes after this field: size = 12 + length
        ...                              @12   (v2: partition_leader_epoch; legacy: crc)
        magic                   int8     @16   0, 1 or 2

A v2 record batch has a 61-byte header::

    RecordBatch :=
        base_offset             int64    @0
        batch_length            int32    @8
        partition_leader_epoch  int32    @12   not covered by the CRC
        magic                   int8     @16   = 2
        crc                     uint32   @17   CRC-32C of attributes .. end of batch
        attributes              int16    @21   bits 0-2 codec, 3 log-append time,
                                               4 transactional, 5 control
        last_offset_delta       int32    @23
        first_timestamp         int64    @27
        max_timestamp           int64    @35
        producer_id             int64    @43
        producer_epoch          int16    @51
        base_sequence           int32    @53
        record_count            int32    @57
        records                          @61

A legacy message (magic 0 or 1) has its own::

    Message :=
        offset                  int64    @0
        message_size            int32    @8
        crc                     uint32   @12   CRC-32 of magic .. end of message
        magic                   int8     @16
        attributes              int8     @17   bits 0-2 codec, 3 log-append time (magic 1)
        timestamp               int64    @18   magic 1 only
        key, value ...

``read_header`` views a v2 header as a named tuple, ``patch_header`` rewrites its fields in
place (recomputing the CRC when a covered field changed), ``new_header`` and ``set_crc``
make one for a batch built elsewhere, ``patch_message`` does the same for a legacy
message; ``entry_length`` and ``entry_frame`` read the common prefix, and ``iter_entries``
and ``next_offset`` walk a blob's entries by their headers alone (nothing decoded, no CRC
checked).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kcodec.crc import crc32, crc32c
from kcodec.errors import TruncatedError

__all__ = ["BatchHeader", "HEADER_SIZE", "ENTRY_OVERHEAD", "ENTRY_PREFIX", "MIN_ENTRY_LENGTH",
           "V2_MIN_LENGTH", "read_header", "patch_header", "patch_message", "new_header",
           "compute_crc", "set_crc", "entry_length",
           "entry_frame", "iter_entries", "next_offset", "ATTR_CODEC_MASK", "ATTR_LOG_APPEND_TIME", "ATTR_TRANSACTIONAL",
           "ATTR_CONTROL"]

HEADER_SIZE = 61            # a v2 batch's header; its records start here
ENTRY_OVERHEAD = 12         # base offset and length: an entry's size is this + its length
ENTRY_PREFIX = 17           # bytes needed to read an entry's length and magic
MIN_ENTRY_LENGTH = 14       # the smallest length of any entry (a magic 0 message)
V2_MIN_LENGTH = HEADER_SIZE - ENTRY_OVERHEAD
_MIN_LENGTHS = (MIN_ENTRY_LENGTH, 22, V2_MIN_LENGTH)     # by magic: 0, 1, 2

ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi4xB")         # base offset, length, (4 bytes), magic
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_CRC_FROM = 21              # the v2 CRC covers the bytes from the attributes on
_PRODUCER = struct.Struct(">qhi")         # producer id, epoch, base sequence at 43
_MSG_CRC_FROM = 16          # a legacy message's CRC covers the bytes from its magic on
_WRAP = 1 << 63
_MASK64 = (1 << 64) - 1


_new_tuple = tuple.__new__


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch, field by field (see the module docstring)."""

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

    @property
    def size(self) -> int:
        """Bytes the whole batch takes (header and records)."""
        return self.batch_length + ENTRY_OVERHEAD

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


def read_header(buf: Any, pos: int = 0) -> BatchHeader:
    """The v2 header at byte ``pos`` of ``buf`` (any buffer); ``TruncatedError`` when fewer
    than 61 bytes are there. Nothing is checked: the magic may be other than 2."""
    left = len(buf) - pos
    if left < HEADER_SIZE:
        raise TruncatedError(HEADER_SIZE, pos, max(left, 0), "record batch header")
    return _new_tuple(BatchHeader, _HEADER.unpack_from(buf, pos))   # _make, without its checks


def patch_header(buf: bytearray, pos: int = 0, *, base_offset: int | None = None,
                 partition_leader_epoch: int | None = None, attributes: int | None = None,
                 max_timestamp: int | None = None, first_timestamp: int | None = None,
                 last_offset_delta: int | None = None, producer_id: int | None = None,
                 producer_epoch: int | None = None, base_sequence: int | None = None) -> None:
    """Rewrite the given fields of the v2 batch at ``pos`` of the writable ``buf`` (the
    whole batch must be there). The CRC-32C is recomputed when a field it covers was given
    (all but the base offset and the partition leader epoch). The producer fields go
    together: giving one of them needs all three."""
    if base_offset is not None:
        _I64.pack_into(buf, pos, base_offset)
    if partition_leader_epoch is not None:
        _I32.pack_into(buf, pos + 12, partition_leader_epoch)
    covered = False
    if attributes is not None:
        _I16.pack_into(buf, pos + 21, attributes)
        covered = True
    if last_offset_delta is not None:
        _I32.pack_into(buf, pos + 23, last_offset_delta)
        covered = True
    if first_timestamp is not None:
        _I64.pack_into(buf, pos + 27, first_timestamp)
        covered = True
    if max_timestamp is not None:
        _I64.pack_into(buf, pos + 35, max_timestamp)
        covered = True
    if producer_id is not None or producer_epoch is not None or base_sequence is not None:
        if producer_id is None or producer_epoch is None or base_sequence is None:
            raise ValueError("producer_id, producer_epoch and base_sequence go together")
        _PRODUCER.pack_into(buf, pos + 43, producer_id, producer_epoch, base_sequence)
        covered = True
    if covered:
        set_crc(buf, pos)


def patch_message(buf: bytearray, pos: int = 0, *, offset: int | None = None,
                  attributes: int | None = None, timestamp: int | None = None) -> None:
    """Rewrite the offset, attributes or (magic 1) timestamp of the legacy message at
    ``pos`` of ``buf``; the CRC-32 is recomputed when the attributes or timestamp change."""
    if offset is not None:
        _I64.pack_into(buf, pos, offset)
    if attributes is None and timestamp is None:
        return
    if attributes is not None:
        buf[pos + 17] = attributes & 0xFF
    if timestamp is not None:
        if buf[pos + 16] != 1:
            raise ValueError("only a magic 1 message has a timestamp")
        _I64.pack_into(buf, pos + 18, timestamp)
    end = pos + _I32.unpack_from(buf, pos + 8)[0] + ENTRY_OVERHEAD
    _U32.pack_into(buf, pos + 12, crc32(memoryview(buf)[pos + _MSG_CRC_FROM:end]))


def entry_length(buf: Any, pos: int = 0) -> int:
    """The length field of the entry at ``pos`` (its size is 12 + length), unchecked;
    ``TruncatedError`` when fewer than ``ENTRY_OVERHEAD`` (12) bytes are left."""
    left = len(buf) - pos
    if left < ENTRY_OVERHEAD:
        raise TruncatedError(ENTRY_OVERHEAD, pos, max(left, 0), "entry header")
    return _I32.unpack_from(buf, pos + 8)[0]


def entry_frame(buf: Any, pos: int = 0) -> tuple[int, int, int]:
    """(base offset, length field, magic as an unsigned byte) of the entry at ``pos``, unchecked;
    ``TruncatedError`` when fewer than ``ENTRY_PREFIX`` (17) bytes are left. The entry's
    size is 12 + length."""
    left = len(buf) - pos
    if left < ENTRY_PREFIX:
        raise TruncatedError(ENTRY_PREFIX, pos, max(left, 0), "entry header")
    return _PREFIX.unpack_from(buf, pos)


def iter_entries(buf: Any, pos: int = 0) -> Any:
    """(position, size, magic) of each whole, well-framed entry from ``pos``: the walk stops
    before a partial entry, a length below its magic's minimum, an unknown magic or (v2) a
    negative record count, where the batch readers stop too. Nothing inside an entry is
    looked at (a legacy message's key and value lengths, a batch's records)."""
    n = len(buf)
    while n - pos >= ENTRY_PREFIX:
        _offset, length, magic = entry_frame(buf, pos)
        if magic > 2 or length < _MIN_LENGTHS[magic] or length > n - pos - ENTRY_OVERHEAD:
            return
        if magic == 2 and _I32.unpack_from(buf, pos + 57)[0] < 0:
            return                                   # a negative record count
        yield pos, length + ENTRY_OVERHEAD, magic
        pos += length + ENTRY_OVERHEAD


def next_offset(buf: Any, start: int) -> int:
    """The offset after the last whole entry of a records blob (``start`` if there is
    none, or if every entry ends before it): from the headers alone. A v2 batch ends at its
    base offset + last offset delta; a legacy message (or compressed wrapper) at its offset."""
    nxt = start
    for pos, _size, magic in iter_entries(buf):
        if magic == 2:
            base, lod = _I64.unpack_from(buf, pos)[0], _I32.unpack_from(buf, pos + 23)[0]
            end = base + lod + 1
        else:
            end = _I64.unpack_from(buf, pos)[0] + 1
        end = ((end + _WRAP) & _MASK64) - _WRAP      # int64 arithmetic, as the readers do
        if end > nxt:
            nxt = end
    return nxt


def new_header(*, batch_length: int, attributes: int, last_offset_delta: int,
               first_timestamp: int, max_timestamp: int, record_count: int,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               base_offset: int = 0, partition_leader_epoch: int = -1) -> bytearray:
    """A v2 header with a zero CRC: append the records, then ``set_crc``."""
    return bytearray(_HEADER.pack(base_offset, batch_length, partition_leader_epoch, 2, 0,
                                  attributes, last_offset_delta, first_timestamp,
                                  max_timestamp, producer_id, producer_epoch, base_sequence,
                                  record_count))


def compute_crc(buf: Any, pos: int = 0, end: int | None = None) -> int:
    """The CRC-32C of the whole v2 batch at ``pos`` of ``buf`` (ending at ``end``: by
    default where its length field says), as its header should hold."""
    if end is None:
        end = pos + _I32.unpack_from(buf, pos + 8)[0] + ENTRY_OVERHEAD
    return crc32c(memoryview(buf)[pos + _CRC_FROM:end])


def set_crc(buf: bytearray, pos: int = 0) -> None:
    """Compute and store the CRC-32C of the whole v2 batch at ``pos`` of ``buf``."""
    _U32.pack_into(buf, pos + 17, compute_crc(buf, pos))
