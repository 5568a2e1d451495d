"""Record objects of the pure-Python record twins (``batch``, ``legacy``).

A record is what iterating a batch yields; a control record (in a control batch) also
carries its decoded marker. ``RecordMetadata`` is what the builders' ``append`` returns.
They are ``__slots__`` classes: CPython's specialising interpreter reads slot attributes
fastest. ``kcodec._cy._record`` defines the same classes, fields and behaviour.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import CorruptDataError

__all__ = ["Record", "ControlRecord", "RecordMetadata", "make_control", "parse_control"]

Header = tuple[str, bytes | None]


class Record:
    """One record: ``offset``, ``timestamp``, ``timestamp_type`` (-1 none, 0 create time,
    1 log append time), ``key`` and ``value`` (bytes or None), ``headers`` (a list of
    (str, bytes or None) pairs, order and duplicates kept) and ``attributes`` (the record's
    attribute byte; for a legacy message, the message's attributes).

    ``size_in_bytes`` is the bytes the record takes in its (uncompressed) batch: for v2 its
    length varint and body, for a legacy message its whole entry (offset, size and message).
    ``checksum`` is a legacy message's stored CRC-32 (None for v2 records, which have no
    checksum of their own: the batch's CRC-32C covers them); ``validate_crc()`` says whether
    it matches the message's bytes (always True for v2 records)."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "attributes",
                 "size_in_bytes", "checksum", "_computed_crc")

    is_control = False

    def __init__(self, offset: int, timestamp: int, timestamp_type: int, key: bytes | None,
                 value: bytes | None, headers: list[Header], attributes: int = 0,
                 size_in_bytes: int = 0, checksum: int | None = None,
                 computed_crc: int | None = None) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes
        self.size_in_bytes = size_in_bytes
        self.checksum = checksum
        self._computed_crc = computed_crc

    def validate_crc(self) -> bool:
        """Whether a legacy message's stored CRC-32 matches its bytes (True for v2 records)."""
        return self.checksum == self._computed_crc

    def _tuple(self) -> tuple[Any, ...]:
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                self.headers, self.attributes, self.is_control)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return self._tuple() == other._tuple()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"key={self.key!r}, value={self.value!r}, headers={self.headers!r})")


class ControlRecord(Record):
    """A record of a control batch: ``control_type`` (0 abort, 1 commit; KRaft uses more),
    ``version`` of the control key, and ``coordinator_epoch`` (commit and abort markers;
    None for other types)."""

    __slots__ = ("control_type", "version", "coordinator_epoch")

    control_type: int
    version: int
    coordinator_epoch: int | None

    is_control = True

    def _tuple(self) -> tuple[Any, ...]:
        return Record._tuple(self) + (self.control_type, self.version, self.coordinator_epoch)

    def __repr__(self) -> str:
        return (f"ControlRecord(offset={self.offset}, timestamp={self.timestamp}, "
                f"control_type={self.control_type}, coordinator_epoch={self.coordinator_epoch})")


class RecordMetadata:
    """What a builder's ``append`` returns: ``offset_delta`` (from the base offset),
    ``timestamp`` (as written), ``size`` (bytes the record takes in the batch) and ``crc``
    (a legacy message's CRC-32; None for v2 records)."""

    __slots__ = ("offset_delta", "timestamp", "size", "crc")

    def __init__(self, offset_delta: int, timestamp: int, size: int,
                 crc: int | None = None) -> None:
        self.offset_delta = offset_delta
        self.timestamp = timestamp
        self.size = size
        self.crc = crc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return (self.offset_delta, self.timestamp, self.size) == (
            other.offset_delta, other.timestamp, other.size)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RecordMetadata(offset_delta={self.offset_delta}, "
                f"timestamp={self.timestamp}, size={self.size})")



def make_control(
    offset: int, timestamp: int, timestamp_type: int,
    key: bytes | None, value: bytes | None, headers: list, attributes: int,
    where: int, size_in_bytes: int = 0,
) -> ControlRecord:
    """Decode a control record's key (version int16, type int16) and, for commit/abort
    markers, its value (version int16, coordinator epoch int32)."""
    r = ControlRecord(offset, timestamp, timestamp_type, key, value, headers, attributes,
                      size_in_bytes)
    r.version, r.control_type, r.coordinator_epoch = parse_control(key, value, where)
    return r


def parse_control(key: bytes | None, value: bytes | None,
                  where: int = 0) -> tuple[int, int, int | None]:
    """A control record's (version, control type, coordinator epoch) from its key and value:
    the key is version int16, type int16; a commit (1) or abort (0) marker's value is
    version int16, coordinator epoch int32 (None for other types). CorruptDataError (at
    ``where``) when they are too short."""
    if key is None or len(key) < 4:
        raise CorruptDataError("control record key shorter than 4 bytes", where)
    version = int.from_bytes(key[0:2], "big", signed=True)
    control_type = int.from_bytes(key[2:4], "big", signed=True)
    epoch = None
    if control_type in (0, 1):
        if value is None or len(value) < 6:
            raise CorruptDataError("transaction marker value shorter than 6 bytes", where)
        epoch = int.from_bytes(value[2:6], "big", signed=True)
    return version, control_type, epoch
