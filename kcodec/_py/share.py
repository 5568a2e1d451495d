"""Share-group records (KIP-932): ``ShareRecord``, a record that also names its ``topic``,
``partition`` and ``delivery_count``, and ``share_records``, which makes them from the
records of a decoded batch. ``kcodec._cy.share`` is the compiled twin: the same names,
fields, behaviour and errors.

A share consumer makes one ShareRecord per record it hands out, which is most of its
work: the compiled twin does it in C (no Python per record, no cyclic-GC tracking).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kcodec._py._record import Record
from kcodec.errors import EncodeTypeError

__all__ = ["ShareRecord", "share_records"]


class ShareRecord(Record):
    """A record a share consumer delivered: a Record with ``topic``, ``partition`` and
    ``delivery_count`` (1 the first time; more after a release or a lock timeout)."""

    __slots__ = ("topic", "partition", "delivery_count")

    topic: str
    partition: int
    delivery_count: int

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 timestamp_type: int, key: bytes | None, value: bytes | None,
                 headers: list, attributes: int = 0, delivery_count: int = 1) -> None:
        Record.__init__(self, offset, timestamp, timestamp_type, key, value, headers, attributes)
        self.topic = topic
        self.partition = partition
        self.delivery_count = delivery_count

    def _tuple(self) -> tuple[Any, ...]:
        return (self.topic, self.partition, self.delivery_count) + Record._tuple(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShareRecord):
            return NotImplemented
        return self._tuple() == other._tuple()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ShareRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, delivery_count={self.delivery_count}, "
                f"key={self.key!r}, value={self.value!r})")


def share_records(records: Iterable[Record], topic: str, partition: int,
                  delivery_count: int) -> list:
    """A ShareRecord for each Record of ``records`` (an iterable: a list, or a batch, whose
    records are then made one at a time), in order, naming ``topic`` and ``partition``,
    each with ``delivery_count``."""
    try:
        it = iter(records)
    except TypeError:
        raise EncodeTypeError(f"records must be an iterable of Record objects, not "
                              f"{type(records).__name__}") from None
    out = []
    new = ShareRecord.__new__
    init = Record.__init__
    for r in it:
        if not isinstance(r, Record):
            raise EncodeTypeError(f"records must hold Record objects, not {type(r).__name__}")
        s = new(ShareRecord)
        init(s, r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers,
             r.attributes, r.size_in_bytes)          # no checksum: a share record has none
        s.topic = topic
        s.partition = partition
        s.delivery_count = delivery_count
        out.append(s)
    return out
