"""Errors the client raises: broker error codes become ``KafkaError`` only here, at the edge.

Broker error codes are data (``error_name``/``is_retriable``) until the client decides an
operation failed; then it raises ``KafkaError`` carrying the code, its name and whether a
retry could help.
"""

from __future__ import annotations

from kcodec.errors import KcodecError, ProtocolError
from kcodec.protocol import ErrorCode

__all__ = ["KafkaError", "KafkaTimeoutError", "BrokerNotAvailableError", "ClientClosedError",
           "AuthenticationError", "SaslAuthenticationError", "SslAuthenticationError",
           "NoOffsetForPartitionError", "ProtocolError", "error_name", "is_retriable", "check"]

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


class KafkaTimeoutError(KcodecError, TimeoutError):
    """An operation did not complete within its timeout."""


class BrokerNotAvailableError(KcodecError, ConnectionError):
    """No broker could be reached (connection refused, DNS failure, handshake failure).

    ``definite`` says the address answered in a way waiting cannot change (refused, no
    such host, not a Kafka peer); ``retriable`` is False when the client gives up at once
    because every bootstrap address of a client that never reached a broker was definite.
    """

    def __init__(self, message: str, retriable: bool = True, definite: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.definite = definite


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


def check(code: int, context: str = "", message: str | None = None) -> None:
    if code:
        raise KafkaError(code, context, message)
