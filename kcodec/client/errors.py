"""Errors the client raises: broker error codes become ``KafkaError`` only here, at the edge.

Broker error codes are data (``error_name``/``is_retriable``) until the client decides an
operation failed; then it raises ``KafkaError`` carrying the code, its name and whether a
retry could help.
"""

from __future__ import annotations

from kcodec.errors import KcodecError, ProtocolError
from kcodec.protocol import ErrorCode

__all__ = ["KafkaError", "RecordTooLargeError", "BatchTooLargeError", "KafkaTimeoutError", "BrokerNotAvailableError",
           "ClientClosedError", "ResponseTooLargeError",
           "AuthenticationError", "SaslAuthenticationError", "SslAuthenticationError",
           "NoOffsetForPartitionError", "ProtocolError", "error_name", "is_retriable", "check",
           "HookError", "SerializationError", "RecordDeserializationError", "PartitionerError",
           "AssignorError", "TransactionError", "TransactionStateError",
           "AbortableTransactionError", "FatalTransactionError", "ProducerFencedError",
           "ShareStateError", "SaslMechanismError",
           "COORDINATOR_CODES", "FENCED_CODES", "REJOIN_CODES"]

# The group protocols' sets of codes, from the error table's flags (kcodec.protocol.ErrorCode):
# find the coordinator again (it moved; or it is loading the group, and asking again finds
# it or waits), the membership is gone (fenced: the partitions are lost), join again.
COORDINATOR_CODES = frozenset(c for c in ErrorCode if c.coordinator_moved) | {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
FENCED_CODES = frozenset(c for c in ErrorCode if c.member_fenced)
REJOIN_CODES = frozenset(c for c in ErrorCode if c.rejoin)

def error_name(code: int) -> str:
    try:
        return str(ErrorCode(code).name)  # type: ignore[operator]
    except ValueError:
        return f"ERROR_{code}"


def is_retriable(code: int) -> bool:
    try:
        return bool(ErrorCode(code).retriable)  # type: ignore[operator]
    except ValueError:
        return False


class KafkaError(KcodecError):
    """The broker answered an operation with an error code."""

    def __init__(self, code: int, context: str = "", message: str | None = None) -> None:
        self.code = code
        self.name = error_name(code)
        self.retriable = is_retriable(code)
        self.context = context
        self.message = message           # the broker's error message, if it sent one
        text = f"{self.name} ({code})"
        if context:
            text = f"{context}: {text}"
        if message:
            text += f": {message}"
        super().__init__(text)


class RecordTooLargeError(KafkaError):
    """A record the producer refuses before sending it (Java: RecordTooLargeException): with
    its batch's header it is ``size`` bytes, more than the ``setting`` (``limit``) allows.
    Nothing of it was sent; ``code`` is MESSAGE_TOO_LARGE, as the broker would answer."""

    def __init__(self, size: int, limit: int, setting: str) -> None:
        self.size, self.limit, self.setting = size, limit, setting
        self.code = int(ErrorCode.MESSAGE_TOO_LARGE)
        self.name = error_name(self.code)
        self.retriable = False
        self.context = "send"
        also = " (and the broker's message.max.bytes)" if setting == "max_request_size" else ""
        KcodecError.__init__(self, f"the record is {size} bytes with its batch header, more "
                                   f"than {setting} ({limit}): raise {setting}{also}, or "
                                   "send smaller records")


class BatchTooLargeError(RecordTooLargeError):
    """A consumer's fetches of ``topic[partition]`` at ``offset`` bring part of a record
    batch and never the whole of it (Java: RecordTooLargeException, "failed to make
    progress"): its length field says ``size`` bytes, ``received`` came, ``fetches`` times
    in a row. The position cannot move, so the consumer stops fetching the partition there
    and ``poll`` raises this until a seek; the message names the settings that let the
    batch through. ``code`` is MESSAGE_TOO_LARGE; not retriable."""

    #: answers in a row, each owing the partition a whole batch, before the consumer gives up
    FETCHES = 3

    def __init__(self, topic: str, partition: int, offset: int, size: int, received: int,
                 fetches: int, limits: dict[str, int]) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.size, self.received, self.fetches = size, received, fetches
        self.code = int(ErrorCode.MESSAGE_TOO_LARGE)
        self.name = error_name(self.code)
        self.retriable = False
        self.context = f"fetch {topic}[{partition}]"
        over = [f"{name} ({limit})" for name, limit in limits.items() if limit < size]
        KcodecError.__init__(
            self, f"{topic}[{partition}] at offset {offset}: failed to make progress, the record "
                  f"batch there is {size} bytes (its length field) and {fetches} fetches in a "
                  f"row brought only {received} bytes of it; to let it through raise "
                  + (" and ".join(over) if over else "the fetch limits")
                  + f" above {size}, or seek past offset {offset}")
        self.setting = over[0].split(" ")[0] if over else "max_partition_fetch_bytes"
        self.limit = limits.get(self.setting, 0)


class KafkaTimeoutError(KcodecError, TimeoutError):
    """An operation did not complete within its timeout."""


class BrokerNotAvailableError(KcodecError, ConnectionError):
    """No broker could be reached (connection refused, DNS failure, handshake failure).

    ``definite`` says the address answered in a way waiting cannot change (refused, no
    such host, not a Kafka peer); ``retriable`` is False when the client gives up at once
    because every bootstrap address of a client that never reached a broker was definite.
    """

    def __init__(self, message: str, retriable: bool = True, definite: bool = False,
                 after_handshake: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.definite = definite
        # closed by the peer on the first request after a good handshake (a SASL listener)
        self.after_handshake = after_handshake


class ResponseTooLargeError(ProtocolError):
    """A broker announced a response larger than ``receive_message_max_bytes`` (librdkafka's
    ``receive.message.max.bytes``): the connection is closed before the body is read, so
    no memory is spent on it. ``size`` is the announced size, ``limit`` the setting."""

    def __init__(self, where: str, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(
            f"{where}: the broker announced a response of {size} bytes, more than "
            f"receive_message_max_bytes ({limit}); the connection was closed without reading "
            "it. If the broker is right (a record batch larger than the fetch limits), raise "
            "receive_message_max_bytes; otherwise the peer is broken or hostile")


class ClientClosedError(KcodecError):
    """The client was closed while the operation was pending."""


class NoOffsetForPartitionError(KcodecError):
    """A partition has no committed offset and ``auto_offset_reset`` is ``"none"``:
    the application must ``seek`` it first (Java: NoOffsetForPartitionException)."""

    retriable = False

    def __init__(self, partitions: list) -> None:
        self.partitions = list(partitions)
        names = ", ".join(f"{tp[0]}[{tp[1]}]" for tp in self.partitions)
        super().__init__(f"no committed offset for {names} and auto_offset_reset is 'none': "
                         "seek() to a position first")


class AuthenticationError(KcodecError):
    """The client could not authenticate (never retried; the text names no secret)."""

    retriable = False


class SaslAuthenticationError(AuthenticationError):
    """SASL failed: wrong password, refused or expired token, mechanism not enabled."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: untrusted certificate, wrong host name, protocol mismatch."""


class HookError(KcodecError):
    """A user-supplied hook (kcodec.client.hooks) failed or returned something unusable;
    the hook's own exception, if any, is the ``__cause__``."""

    retriable = False


class SerializationError(HookError):
    """A producer's ``key_serializer`` or ``value_serializer`` failed: nothing was queued."""

    def __init__(self, setting: str, topic: str, problem: str) -> None:
        self.setting, self.topic = setting, topic
        super().__init__(f"{setting} failed for a record to {topic!r}: {problem}; nothing was "
                         "sent (fix the serializer, or send bytes)")


class RecordDeserializationError(HookError):
    """A consumer's ``key_deserializer`` or ``value_deserializer`` failed on the record at
    ``offset`` of ``topic[partition]`` (Java: RecordDeserializationException). The
    partition's position is that record: each poll fails on it again until the
    application seeks past it."""

    def __init__(self, setting: str, topic: str, partition: int, offset: int,
                 problem: str) -> None:
        self.setting, self.topic, self.partition, self.offset = setting, topic, partition, offset
        super().__init__(f"{setting} failed on {topic}[{partition}] at offset {offset}: "
                         f"{problem}; the position stays there: fix the deserializer, or "
                         f"seek(TopicPartition({topic!r}, {partition}), {offset + 1}) to skip "
                         "the record")


class PartitionerError(HookError):
    """The ``partitioner`` raised, or chose no valid partition: nothing was queued."""

    def __init__(self, topic: str, partitions: int, problem: str) -> None:
        self.topic, self.partitions = topic, partitions
        super().__init__(f"partitioner failed for a record to {topic!r} ({partitions} "
                         f"partitions): {problem}; nothing was sent")


class AssignorError(HookError):
    """A user assignor (``partition_assignment_strategy``) raised, or returned an
    assignment the group cannot use."""


def check(code: int, context: str = "", message: str | None = None) -> None:
    if code:
        raise KafkaError(code, context, message)


class TransactionError(KcodecError):
    """Base of the transactional producer's errors; ``code`` is the broker's, if any."""

    code: int | None = None

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TransactionStateError(TransactionError):
    """A call in the wrong state (Java: IllegalStateException), e.g. send outside a
    transaction or commit after an abortable error."""


class AbortableTransactionError(TransactionError):
    """The transaction cannot commit: call ``abort_transaction`` and start a new one."""


class FatalTransactionError(TransactionError):
    """The producer cannot go on: close it (and start a new one if it was fenced)."""


class ProducerFencedError(FatalTransactionError):
    """Another producer with the same transactional_id took over (or the coordinator ended
    this one's transaction after transaction_timeout_ms and bumped the epoch)."""


class ShareStateError(KcodecError):
    """A share consumer used out of order: ``acknowledge`` in implicit mode, a record this
    consumer did not deliver (or already acknowledged), or ``poll`` in explicit mode with
    records of the last poll not acknowledged."""


class SaslMechanismError(KcodecError):
    """The server's SASL message is malformed or fails verification (message names no secret)."""
