"""Legacy MessageSet v0/v1 (magic 0 and 1): reading messages and building message sets.

Wire layout (big-endian):

    MessageSet := Entry*
    Entry :=
        offset int64
        message_size int32                 bytes after this field
        crc uint32                         CRC-32 (IEEE) of magic .. end of message
        magic int8 (0 or 1)
        attributes int8                    bits 0-2 codec, bit 3 timestamp type (magic 1)
        timestamp int64                    magic 1 only
        key_length int32, key bytes        -1 = null
        value_length int32, value bytes    -1 = null

A compressed entry (codec != 0) is a wrapper: its value is a whole inner MessageSet,
compressed (gzip; snappy raw or xerial; lz4 frame, with the broken header checksum of
magic 0). Inner offsets are absolute for magic 0 and relative for magic 1, where the
wrapper's offset is the absolute offset of the last inner message. A wrapper with the
log-append-time bit gives its timestamp to every inner message.

Each top-level entry is exposed as a ``LegacyBatch`` with the batch interface of v2 where it
means something (producer fields are -1, ``is_control`` is False). This is the pure-Python
twin of ``kcodec._cy.legacy``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

from kcodec._limits import DEFAULT_MAX_SIZE
from kcodec._py._record import Record, RecordMetadata
from kcodec._py._wire import bytes_like, check_int, need, wrap64
from kcodec._py.compression import compress, decompress
from kcodec._py.crc import crc32
from kcodec.errors import ChecksumError, CorruptDataError, EncodeError

__all__ = ["LegacyBatch", "MessageSetBuilder"]

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_I32_MAX = (1 << 31) - 1
_HEAD = struct.Struct(">qiIbb")        # offset, size, crc, magic, attributes: 18 bytes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _decompress(codec: int, data: Any, max_size: int, magic: int) -> bytes:
    return decompress(codec, data, max_size, magic=magic)


def _compress(codec: int, data: bytes, level: int | None, magic: int) -> bytes:
    return compress(codec, data, level, magic=magic)


class LegacyBatch:
    """One top-level legacy message: a plain message (one record) or a compressed wrapper
    (its inner messages are the records). Fields follow RecordBatch where they apply."""

    __slots__ = ("position", "offset", "message_size", "crc", "magic", "attributes",
                 "timestamp", "_data", "_key", "_value", "_validate", "_max_size", "_inner", "_it")

    # Slot types (set by the reader without __init__; annotations only, for type checkers).
    position: int
    offset: int
    message_size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    _data: Any
    _key: tuple[int, int] | None
    _value: tuple[int, int] | None
    _validate: bool
    _max_size: int
    _inner: Any
    _it: Iterator[Record] | None

    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    is_transactional = False
    is_control = False

    @property
    def size(self) -> int:
        """Bytes the message takes in the buffer, its offset and size included."""
        return self.message_size + 12

    @property
    def compression(self) -> int:
        """The codec id (``Codec``) of a wrapper message (0 for a plain one)."""
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        """-1 for magic 0; else 0 create time, 1 log append time."""
        return -1 if self.magic == 0 else (self.attributes >> 3) & 1

    @property
    def first_timestamp(self) -> int:
        """The message's timestamp (-1 for magic 0)."""
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        """The message's timestamp (-1 for magic 0)."""
        return self.timestamp

    @property
    def last_offset(self) -> int:
        """The offset of the last (inner) message."""
        return self.offset

    @property
    def next_offset(self) -> int:
        """The offset after the last (inner) message."""
        return wrap64(self.offset + 1)

    @property
    def base_offset(self) -> int:
        """The first record's offset (decompresses a wrapper)."""
        if self.attributes & 0x07 == 0:
            return self.offset
        return self.records()[0].offset

    @property
    def record_count(self) -> int:
        """1 for a plain message; the inner message count of a wrapper (decompresses it)."""
        if self.attributes & 0x07 == 0:
            return 1
        return len(self.records())

    @property
    def key(self) -> bytes | None:
        """The message's key (None when null)."""
        return self._span(self._key)

    @property
    def value(self) -> bytes | None:
        """The message's value (None when null; a wrapper's is its compressed inner set)."""
        return self._span(self._value)

    def _span(self, span: tuple[int, int] | None) -> bytes | None:
        return None if span is None else bytes(self._data[span[0]:span[1]])

    def computed_crc(self) -> int:
        """The CRC-32 of the message, computed now."""
        p = self.position
        return crc32(self._data[p + 16:p + 12 + self.message_size])

    def validate_crc(self) -> bool:
        """True if the stored CRC-32 matches the message."""
        return self.computed_crc() == self.crc

    def check_crc(self) -> None:
        """Raise ``ChecksumError`` unless the stored CRC-32 matches."""
        actual = self.computed_crc()
        if actual != self.crc:
            raise ChecksumError(self.crc, actual, self.position, "message CRC-32")

    def records(self) -> list[Record]:
        """Every record, as a new list of new records (a wrapper is decompressed once)."""
        codec = self.attributes & 0x07
        ts_type = self.timestamp_type
        if codec == 0:
            p = self.position
            end = p + 12 + self.message_size
            return [Record(self.offset, self.timestamp, ts_type, self.key, self.value, [],
                           self.attributes, end - p, self.crc, crc32(self._data[p + 16:end]))]
        inner = self._inner
        if inner is None:
            if self._value is None:
                raise CorruptDataError("compressed message with a null value", self.position)
            inner = _decompress(codec, self._data[self._value[0]:self._value[1]],
                                self._max_size, self.magic)
        out = _inner_records(inner, self)
        self._inner = inner  # checked and decompressed: kept for the next iteration
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __next__(self) -> Record:
        """The next record of one iteration kept by the batch (``next(batch)``)."""
        it = self._it
        if it is None:
            it = self._it = self.__iter__()
        return next(it)

    @staticmethod
    def from_bytes(buf: Any, *, validate_crc: bool = True,
                   max_decompressed_size: int = DEFAULT_MAX_SIZE) -> LegacyBatch:
        """The one top-level legacy message that ``buf`` holds, exactly (TruncatedError when
        it is cut short, CorruptDataError for magic 2 or bytes after it)."""
        from kcodec._py.batch import single_batch

        return single_batch(buf, validate_crc, max_decompressed_size, False)

    def __repr__(self) -> str:
        return (f"LegacyBatch(position={self.position}, offset={self.offset}, "
                f"magic={self.magic}, compression={self.compression}, size={self.size})")


def _parse(data: Any, pos: int, end: int, base: int) -> tuple[int, int, int, int, int, int,
                                                               tuple[int, int] | None,
                                                               tuple[int, int] | None, int]:
    """Parse the message at pos (its 12-byte log header already known to fit):
    (offset, size, crc, magic, attributes, timestamp, key span, value span, end)."""
    need(pos, end, 18, "message header", base)
    offset, size, crc, magic, attributes = _HEAD.unpack_from(data, pos)
    need(pos + 12, end, size, "message", base)
    mend = pos + 12 + size
    p = pos + 18
    ts = -1
    if magic == 1:
        need(p, mend, 8, "message timestamp", base)
        ts = _I64.unpack_from(data, p)[0]
        p += 8
    elif magic != 0:
        raise CorruptDataError(f"unknown magic byte {magic}", pos + 16 + base)
    need(p, mend, 4, "message key length", base)
    n = _I32.unpack_from(data, p)[0]
    p += 4
    key = None
    if n != -1:
        need(p, mend, n, "message key", base)
        key = (p, p + n)
        p += n
    need(p, mend, 4, "message value length", base)
    n = _I32.unpack_from(data, p)[0]
    p += 4
    value = None
    if n != -1:
        need(p, mend, n, "message value", base)
        value = (p, p + n)
        p += n
    if p != mend:
        raise CorruptDataError(f"message size {size} but its fields took {p - pos - 12} bytes",
                               pos + 8 + base)
    return offset, size, crc, magic, attributes, ts, key, value, mend


def message_at(data: Any, pos: int, validate_crc: bool, max_size: int) -> LegacyBatch:
    """The top-level message at ``pos`` of ``data`` (whose framing the caller checked)."""
    m = LegacyBatch.__new__(LegacyBatch)
    (m.offset, m.message_size, m.crc, m.magic, m.attributes, m.timestamp, m._key, m._value,
     _) = _parse(data, pos, len(data), 0)
    m.position = pos
    m._data = data
    m._validate = validate_crc
    m._max_size = max_size
    m._inner = None
    m._it = None
    return m


def _inner_records(inner: bytes, w: LegacyBatch) -> list[Record]:
    """The inner messages of wrapper ``w`` (decompressed into ``inner``) as records."""
    pos = 0
    end = len(inner)
    out: list[Record] = []
    wmagic = w.magic
    log_append = wmagic == 1 and (w.attributes >> 3) & 1
    while pos < end:
        need(pos, end, 12, "inner message", 0)
        offset, size, crc, magic, attributes, ts, key, value, mend = _parse(inner, pos, end, 0)
        if magic != wmagic:
            raise CorruptDataError(f"inner message magic {magic} differs from the wrapper's "
                                   f"{wmagic}", pos + 16)
        if attributes & 0x07:
            raise CorruptDataError("compressed message inside a compressed message", pos + 17)
        actual = crc32(inner[pos + 16:mend])
        if w._validate:
            if actual != crc:
                raise ChecksumError(crc, actual, pos, "inner message CRC-32")
        if log_append:
            ts_type = 1
            ts = w.timestamp
        else:
            ts_type = -1 if magic == 0 else (attributes >> 3) & 1
        out.append(Record(offset, ts, ts_type,
                          None if key is None else inner[key[0]:key[1]],
                          None if value is None else inner[value[0]:value[1]], [], attributes,
                          mend - pos, crc, actual))
        pos = mend
    if not out:
        raise CorruptDataError("compressed message holds no inner messages", w.position)
    if wmagic == 1:
        # The absolute offset of relative offset 0; a wrapper written without its last
        # offset (0, as some clients do) leaves the inner offsets as they are, as Java does.
        shift = wrap64(w.offset - out[-1].offset)
        if shift >= 0:
            for r in out:
                r.offset = wrap64(r.offset + shift)
    return out


class MessageSetBuilder:
    """Builds a legacy message set (magic 0 or 1). With a codec, the messages are written
    as one compressed wrapper message, as the Java client did: inner offsets relative for
    magic 1 (absolute for magic 0), the wrapper carrying the last offset and the largest
    timestamp. ``append`` returns a RecordMetadata (``crc``: the message's CRC-32) or None
    when ``max_size`` is reached.

    Options for matching other clients' accounting: ``wrapper_overhead=False`` leaves the
    wrapper's overhead out of ``size`` and the fullness check, ``full_at_max=True`` counts the
    set full when a message would bring it to exactly ``max_size``, and ``zero_wrapper=True``
    writes the wrapper with offset 0, timestamp 0 and only the codec in its attributes."""

    __slots__ = ("_magic", "_codec", "_level", "_base_offset", "_ts_type", "_max_size",
                 "_buf", "_count", "_last_delta", "_max_ts", "_overhead", "_full_at_max",
                 "_zero_wrapper")

    def __init__(self, *, magic: int = 1, compression: int = 0,
                 compression_level: int | None = None, base_offset: int = 0,
                 timestamp_type: int = 0, max_size: int = 1048576,
                 wrapper_overhead: bool = True, full_at_max: bool = False,
                 zero_wrapper: bool = False) -> None:
        self._magic = check_int(magic, 0, 1, "magic")
        self._overhead = bool(wrapper_overhead)
        self._full_at_max = bool(full_at_max)
        self._zero_wrapper = bool(zero_wrapper)
        self._codec = check_int(compression, 0, 4, "compression codec")
        if self._codec == 4:
            raise EncodeError("zstd needs magic 2")
        if compression_level is not None:
            compress(self._codec, b"", compression_level, magic=self._magic)
        self._level = compression_level
        self._base_offset = check_int(base_offset, _I64_MIN, _I64_MAX, "base offset")
        self._ts_type = check_int(timestamp_type, 0, 1, "timestamp type")
        self._max_size = check_int(max_size, 0, _I32_MAX, "max size")
        self._buf = bytearray()
        self._count = 0
        self._last_delta = -1
        self._max_ts = -1

    @property
    def record_count(self) -> int:
        """Messages appended so far."""
        return self._count

    @property
    def size(self) -> int:
        """Bytes the set takes so far (uncompressed, with a wrapper's overhead unless made
        with ``wrapper_overhead=False``)."""
        if self._codec and self._overhead:
            return len(self._buf) + (26 if self._magic == 0 else 34)
        return len(self._buf)

    def append(self, key: Any, value: Any, timestamp: int | None = None,
               offset_delta: int | None = None) -> RecordMetadata | None:
        """Add a message; its metadata, or None if the set is full."""
        if offset_delta is None:
            od = self._last_delta + 1
            if od > _I64_MAX:
                raise EncodeError(f"offset delta {od} out of range (0..{_I64_MAX})")
        else:
            od = check_int(offset_delta, 0, _I64_MAX, "offset delta")
            if od <= self._last_delta:
                raise EncodeError(f"offset delta {od} not above the previous {self._last_delta}")
        magic = self._magic
        if magic == 0:
            ts = -1
        elif timestamp is None:
            ts = int(time.time() * 1000)
        else:
            ts = check_int(timestamp, _I64_MIN, _I64_MAX, "timestamp")
        key = bytes_like(key, "record key")
        value = bytes_like(value, "record value")
        if self._codec and magic == 1:
            inner_offset = od
        else:
            inner_offset = self._base_offset + od
            if inner_offset > _I64_MAX:
                raise EncodeError(f"offset {inner_offset} out of range")
        msg = _message(inner_offset, magic, self._ts_type << 3 if magic else 0, ts, key, value)
        size = len(msg)
        if self._count:
            total = self.size + size
            if total > self._max_size or (self._full_at_max and total == self._max_size):
                return None
        self._buf += msg
        self._count += 1
        self._last_delta = od
        if ts > self._max_ts or self._count == 1:
            self._max_ts = ts
        return RecordMetadata(od, ts, size, int.from_bytes(msg[12:16], "big"))

    def build(self) -> bytes:
        """The message set bytes (one wrapper message when compressed)."""
        if not self._codec or not self._count:
            return bytes(self._buf)
        payload = _compress(self._codec, bytes(self._buf), self._level, self._magic)
        attrs = self._codec | (self._ts_type << 3 if self._magic else 0)
        if self._zero_wrapper:
            return _message(0, self._magic, self._codec, 0, None, payload)
        last = self._base_offset + self._last_delta
        if last > _I64_MAX:
            raise EncodeError(f"offset {last} out of range")
        return _message(last, self._magic, attrs, self._max_ts, None, payload)


def _message(offset: int, magic: int, attributes: int, ts: int, key: bytes | None,
             value: bytes | None) -> bytes:
    """One entry: log header, CRC-32 and the message fields."""
    body = bytearray((magic, attributes))
    if magic:
        body += _I64.pack(ts)
    for part in (key, value):
        if part is None:
            body += b"\xff\xff\xff\xff"
        else:
            if len(part) > _I32_MAX:
                raise EncodeError(f"message field of {len(part)} bytes too long")
            body += _I32.pack(len(part))
            body += part
    size = len(body) + 4
    if size > _I32_MAX:
        raise EncodeError(f"message of {size} bytes too large")
    return (_I64.pack(offset) + _I32.pack(size) + struct.pack(">I", crc32(body))
            + bytes(body))
