"""Errors of the partition log: each carries the Kafka ``error_code`` a broker answers with.

    LogError (KcodecError)                  .error_code  .batch_index
    ├── CorruptMessage                      CORRUPT_MESSAGE: bad CRC, framing, torn batch
    ├── InvalidRecord                       INVALID_RECORD: counts, offsets, producer fields
    ├── MessageTooLarge                     MESSAGE_TOO_LARGE: batch > max.message.bytes
    ├── RecordListTooLarge                  RECORD_LIST_TOO_LARGE: set > segment.bytes
    ├── InvalidTimestamp                    INVALID_TIMESTAMP: producer-set LogAppendTime, range
    ├── UnsupportedCompressionType          UNSUPPORTED_COMPRESSION_TYPE: unknown codec id,
    │                                       zstd below magic 2, codec library missing
    ├── OffsetOutOfRange                    OFFSET_OUT_OF_RANGE: read/delete outside the log
    ├── InvalidConfig                       INVALID_CONFIG: a topic config value
    ├── KafkaStorageError                   KAFKA_STORAGE_ERROR: the disk failed us
    └── DescriptorBudgetError               POLICY_VIOLATION: a create would pass the
                                            node's file descriptor budget
"""

from __future__ import annotations

from kcodec.errors import KcodecError
from kcodec.protocol import ErrorCode

__all__ = [
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
    "DescriptorBudgetError",
]


class LogError(KcodecError):
    """A log operation failed; ``error_code`` is what the broker puts in its response and
    ``batch_index`` the index of the offending batch in the appended set (when known);
    ``record_errors`` (index of the record in its batch, message) for each offending record,
    as Kafka's ProduceResponse lists them (KIP-467)."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, batch_index: int | None = None,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        self.batch_index = batch_index
        self.record_errors = record_errors
        super().__init__(message)


class CorruptMessage(LogError):
    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecord(LogError):
    error_code = ErrorCode.INVALID_RECORD


class MessageTooLarge(LogError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLarge(LogError):
    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestamp(LogError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedCompressionType(LogError):
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OffsetOutOfRange(LogError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidConfig(LogError):
    error_code = ErrorCode.INVALID_CONFIG


class KafkaStorageError(LogError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class DescriptorBudgetError(LogError):
    """Creating the partitions asked for would need more file descriptors than the node may
    still open (its limit less a reserve for connections): nothing was created."""

    error_code = ErrorCode.POLICY_VIOLATION
