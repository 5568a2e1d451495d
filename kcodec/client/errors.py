"""Errors the client raises: broker error codes become ``KafkaError`` only here, at the edge.

Broker error codes are data (``error_name``/``is_retriable``) until the client decides an
operation failed; then it raises ``KafkaError`` carrying the code, its name and whether a
retry could help.
"""

from __future__ import annotations

from typing import Optional

from kcodec.errors import KcodecError, ProtocolError

__all__ = ["KafkaError", "KafkaTimeoutError", "BrokerNotAvailableError", "ClientClosedError",
           "ProtocolError", "error_name", "is_retriable", "check"]

# code: (name, retriable) -- the codes the client acts on; others are reported by number.
_CODES: dict[int, tuple[str, bool]] = {
    -1: ("UNKNOWN_SERVER_ERROR", False), 0: ("NONE", False),
    1: ("OFFSET_OUT_OF_RANGE", False), 2: ("CORRUPT_MESSAGE", True),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True), 4: ("INVALID_FETCH_SIZE", False),
    5: ("LEADER_NOT_AVAILABLE", True), 6: ("NOT_LEADER_OR_FOLLOWER", True),
    7: ("REQUEST_TIMED_OUT", True), 8: ("BROKER_NOT_AVAILABLE", False),
    9: ("REPLICA_NOT_AVAILABLE", True), 10: ("MESSAGE_TOO_LARGE", False),
    13: ("NETWORK_EXCEPTION", True), 14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", True), 16: ("NOT_COORDINATOR", True),
    17: ("INVALID_TOPIC_EXCEPTION", False), 19: ("NOT_ENOUGH_REPLICAS", True),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True), 22: ("ILLEGAL_GENERATION", False),
    23: ("INCONSISTENT_GROUP_PROTOCOL", False), 24: ("INVALID_GROUP_ID", False),
    25: ("UNKNOWN_MEMBER_ID", False), 26: ("INVALID_SESSION_TIMEOUT", False),
    27: ("REBALANCE_IN_PROGRESS", False), 29: ("TOPIC_AUTHORIZATION_FAILED", False),
    30: ("GROUP_AUTHORIZATION_FAILED", False), 35: ("UNSUPPORTED_VERSION", False),
    36: ("TOPIC_ALREADY_EXISTS", False), 37: ("INVALID_PARTITIONS", False),
    38: ("INVALID_REPLICATION_FACTOR", False), 41: ("NOT_CONTROLLER", True),
    42: ("INVALID_REQUEST", False), 45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    46: ("DUPLICATE_SEQUENCE_NUMBER", False), 47: ("INVALID_PRODUCER_EPOCH", False),
    56: ("KAFKA_STORAGE_ERROR", True), 59: ("UNKNOWN_PRODUCER_ID", False),
    69: ("GROUP_ID_NOT_FOUND", False), 72: ("LISTENER_NOT_FOUND", True),
    74: ("FENCED_LEADER_EPOCH", True), 75: ("UNKNOWN_LEADER_EPOCH", True),
    79: ("MEMBER_ID_REQUIRED", False), 82: ("FENCED_INSTANCE_ID", False),
    89: ("THROTTLING_QUOTA_EXCEEDED", True), 100: ("UNKNOWN_TOPIC_ID", True),
}




def error_name(code: int) -> str:
    return _CODES.get(code, (f"ERROR_{code}", False))[0]


def is_retriable(code: int) -> bool:
    return _CODES.get(code, ("", False))[1]


class KafkaError(KcodecError):
    """The broker answered an operation with an error code."""

    def __init__(self, code: int, context: str = "", message: Optional[str] = None) -> None:
        self.code = code
        self.name = error_name(code)
        self.retriable = is_retriable(code)
        self.context = context
        text = f"{self.name} ({code})"
        if context:
            text = f"{context}: {text}"
        if message:
            text += f": {message}"
        super().__init__(text)


class KafkaTimeoutError(KcodecError, TimeoutError):
    """An operation did not complete within its timeout."""


class BrokerNotAvailableError(KcodecError, ConnectionError):
    """No broker could be reached (connection refused, DNS failure, handshake failure)."""


class ClientClosedError(KcodecError):
    """The client was closed while the operation was pending."""


def check(code: int, context: str = "", message: Optional[str] = None) -> None:
    if code:
        raise KafkaError(code, context, message)
