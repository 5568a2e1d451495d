"""The client's plain value types, shared by producer, consumer and admin.

    TopicPartition(topic, partition)
    ConsumerRecord(topic, partition, offset, timestamp, timestamp_type, key, value, headers)
    SendResult(partition, offset, timestamp)
    ConsumerGroupMetadata(group_id, generation_id, member_id, group_instance_id)
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition", "ConsumerRecord", "SendResult", "ConsumerGroupMetadata"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list


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
