"""The broker's log: partition logs made of segments, in memory or on disk.

    from kcodec.broker.log import LogManager, LogConfig

    mgr = LogManager(None)            # or a data directory; then mgr.open() recovers it
    log = mgr.create("events", 0, LogConfig())
    res = log.append(batch_bytes, now_ms=now)       # validated, offsets assigned in place
    data = log.read(res.base_offset, 1 << 20)        # whole batches, as stored

    manager.py     ``LogManager``: a log per partition, the data directory, checkpoints, recovery
    partition.py   ``PartitionLog``: segments in offset order; roll, read, retention, truncation
    segment.py     one segment: its bytes, its table of batches, its index files
    files.py       a bounded cache of the segment files' open descriptors, for the process
    recovery.py    what a log's recovery at start cut off, and how it is reported
    validate.py    the produce checks, and the offsets assigned in place
    convert.py     down-conversion for Fetch v0-v3: v2 batches served as magic 0/1
    cleaner.py     compaction: the last record per key
    epochs.py      the leader epoch cache: where each leader epoch began
    txnindex.py    the aborted-transactions index: a ``.txnindex`` file per segment
    config.py      the topic configs the log honours, with Kafka's names and defaults
    errors.py      ``LogError`` and the Kafka error code each carries
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
