"""Building one RecordBatch v2 (magic 2): the pure-Python twin of ``kcodec._cy.builder``.

The wire layout is in ``kcodec._py.batch``. Records are appended to a buffer (their length
varint, attributes 0, timestamp and offset deltas from the first record, key, value and
headers); ``build`` puts the 61-byte header in front, compressed records after it, and the
CRC-32C of everything from the attributes on at offset 17.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable
from typing import Any

from kcodec._py._record import RecordMetadata
from kcodec._py._wire import bytes_like, check_int, uvar_bytes
from kcodec._py.compression import compress
from kcodec._py.crc import crc32c
from kcodec.errors import EncodeError, EncodeTypeError

__all__ = ["RecordBatchBuilder", "RecordMetadata", "record_size", "estimate_batch_size",
           "encode_values"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I16_MIN, _I16_MAX = -(1 << 15), (1 << 15) - 1
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


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
        """Records appended so far."""
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
        """The producer id written into the batch (-1: none)."""
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer epoch written into the batch (-1: none)."""
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        """The first record's sequence number (-1: none)."""
        return self._base_sequence

    @property
    def is_transactional(self) -> bool:
        """True if the batch is marked transactional."""
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


def encode_values(values: list[bytes], start: int, key: bytes | None,
                  max_bytes: int) -> tuple[bytes, int]:
    """``(section, end)``: the records section of a v2 batch holding ``values[start:end]``
    (bytes each), every record with ``key`` (bytes, or None: none), no headers, timestamp
    delta 0 and offset deltas from 0 (the bytes ``RecordBatchBuilder.append`` writes for
    them), ``end`` as far as the section stays within ``max_bytes`` (one record at least)."""
    n = len(values)
    if start < 0 or start >= n:
        raise ValueError(f"start {start} is not an index of the {n} values")
    if key is None:
        kb, kl = b"\x01", 0
    elif type(key) is not bytes:
        raise EncodeTypeError(f"key must be bytes or None, not {type(key).__name__}")
    elif len(key) > _I32_MAX:
        raise EncodeError(f"key of {len(key)} bytes too long")
    else:
        kb, kl = uvar_bytes(len(key) << 1) + key, len(key)
    out = []
    total = 0
    i = start
    while i < n:
        v = values[i]
        if type(v) is not bytes:
            raise EncodeTypeError(f"value {i} must be bytes, not {type(v).__name__}")
        vl = len(v)
        if vl > _I32_MAX - 64 - kl or i - start > _I32_MAX:
            raise EncodeError(f"value {i} of {vl} bytes too long")
        body = b"\x00\x00" + uvar_bytes((i - start) << 1) + kb + uvar_bytes(vl << 1) + v + b"\x00"
        rec = uvar_bytes(len(body) << 1) + body
        if i > start and total + len(rec) > max_bytes:
            break
        out.append(rec)
        total += len(rec)
        i += 1
    return b"".join(out), i
