"""The broker's log: partition logs made of segments, in memory or on disk.

    from kcodec.broker.log import LogManager, LogConfig

    mgr = LogManager(None)            # or a data directory; then mgr.open() recovers it
    log = mgr.create("events", 0, LogConfig())
    res = log.append(batch_bytes, now_ms=now)       # validated, offsets assigned in place
    data = log.read(res.base_offset, 1 << 20)        # whole batches, as stored

Modules: ``config`` (topic configs), ``errors`` (LogError and its Kafka error codes),
``validate`` (the produce checks and in-place offset assignment), ``convert``
(down-conversion for Fetch v0-v3), ``segment`` (one segment's bytes, table and index
files), ``partition`` (PartitionLog: roll, read, retention, truncation), ``cleaner``
(compaction), ``epochs`` (the
leader epoch cache), ``manager`` (LogManager: the data directory, checkpoints, recovery).
"""

from kcodec.broker.log.cleaner import CleanStats
from kcodec.broker.log.config import LogConfig
from kcodec.broker.log.convert import down_convert, magic_for_fetch_version
from kcodec.broker.log.errors import (
    CorruptMessage,
    InvalidConfig,
    InvalidRecord,
    InvalidTimestamp,
    KafkaStorageError,
    LogError,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordListTooLarge,
    UnsupportedCompressionType,
)
from kcodec.broker.log.manager import LogManager
from kcodec.broker.log.partition import PartitionLog
from kcodec.broker.log.segment import Segment, SegmentHook
from kcodec.broker.log.validate import AppendResult, BatchInfo, peek_batches

__all__ = [
    "LogManager",
    "LogConfig",
    "CleanStats",
    "PartitionLog",
    "AppendResult",
    "BatchInfo",
    "peek_batches",
    "down_convert",
    "magic_for_fetch_version",
    "Segment",
    "SegmentHook",
    "LogError",
    "CorruptMessage",
    "InvalidRecord",
    "MessageTooLarge",
    "RecordListTooLarge",
    "InvalidTimestamp",
    "UnsupportedCompressionType",
    "OffsetOutOfRange",
    "InvalidConfig",
    "KafkaStorageError",
]
