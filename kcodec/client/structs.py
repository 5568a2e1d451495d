"""The client's plain value types, shared by producer, consumer and admin.

    TopicPartition(topic, partition)
    ConsumerRecord(topic, partition, offset, timestamp, timestamp_type, key, value, headers):
                   a kcodec.records.Record naming its topic and partition
    SendResult(partition, offset, timestamp)
    ConsumerGroupMetadata(group_id, generation_id, member_id, group_instance_id)
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

from kcodec.records import Record

__all__ = ["TopicPartition", "ConsumerRecord", "SendResult", "ConsumerGroupMetadata"]


class TopicPartition(NamedTuple):
    """A topic's partition: ``TopicPartition("events", 0)``."""
    topic: str
    partition: int


class ConsumerRecord(Record):
    """A record as iterating a consumer hands it out: a ``kcodec.records.Record`` (what
    ``poll`` returns) that also names its ``topic`` and ``partition``. One record type
    for the consumer: whatever takes a Record takes this.

    It used to be a named tuple; indexing, unpacking, ``len`` and ``_asdict`` still work,
    with a DeprecationWarning: use the attributes."""

    __slots__ = ("topic", "partition")
    _fields = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
               "headers")
    topic: str
    partition: int

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 timestamp_type: int, key: bytes | None, value: bytes | None,
                 headers: list, attributes: int = 0) -> None:
        Record.__init__(self, offset, timestamp, timestamp_type, key, value, headers, attributes)
        self.topic = topic
        self.partition = partition

    def _values(self) -> tuple[Any, ...]:
        return (self.topic, self.partition, self.offset, self.timestamp, self.timestamp_type,
                self.key, self.value, self.headers)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ConsumerRecord):
            return self._values() == other._values()
        if isinstance(other, tuple):
            _tuple_use("compared with a tuple")
            return self._values() == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    # ---- the named tuple it was (deprecated)
    def __iter__(self) -> Iterator[Any]:
        _tuple_use("unpacked")
        return iter(self._values())

    def __getitem__(self, index: Any) -> Any:
        _tuple_use("indexed")
        return self._values()[index]

    def __len__(self) -> int:
        _tuple_use("measured with len()")
        return len(self._fields)

    def _asdict(self) -> dict[str, Any]:
        _tuple_use("turned into a dict with _asdict()")
        return dict(zip(self._fields, self._values(), strict=False))


def _tuple_use(how: str) -> None:
    warnings.warn(f"ConsumerRecord is a Record now, not a tuple: {how}, it will stop "
                  "working; use its attributes (record.topic, record.offset, ...)",
                  DeprecationWarning, stacklevel=3)


class SendResult(NamedTuple):
    """Where a produced record was written (offset -1 with ``acks=0``: nobody says)."""

    partition: int
    offset: int
    timestamp: int


class ConsumerGroupMetadata(NamedTuple):
    """What ``send_offsets_to_transaction`` needs of the consumer (``consumer.group_metadata()``)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
