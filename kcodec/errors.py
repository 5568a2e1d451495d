"""The one exception hierarchy of kcodec.

    KcodecError
    ├── DecodeError (also ValueError)        .offset
    │   ├── TruncatedError                   need N bytes at offset X, M available
    │   ├── CorruptDataError                 bad magic, impossible length, varint too long
    │   │   └── ChecksumError                .expected .actual
    │   ├── UnsupportedCodecError            unknown codec id, or its library missing
    │   ├── DecompressionLimitError          output would exceed the caller's limit
    │   └── FetchedBatchError                a fetched batch of .topic/.partition at
    │                                        .fetch_offset does not decode (.cause)
    ├── EncodeError (also ValueError)        value out of range for its wire type
    ├── UnsupportedVersionError              API/field not valid in that version
    └── ProtocolError                        a peer broke the protocol (client side)

Each exception formats its own message from its fields, so both twins raise the same
class with the same text by passing the same fields. Every class pickles.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "KcodecError",
    "DecodeError",
    "TruncatedError",
    "CorruptDataError",
    "ChecksumError",
    "UnsupportedCodecError",
    "DecompressionLimitError",
    "DecodeLimitError",
    "FetchedBatchError",
    "EncodeError",
    "EncodeTypeError",
    "UnsupportedVersionError",
    "ProtocolError",
]


class KcodecError(Exception):
    """Base class of every error kcodec raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.__dict__.copy(), self.args))


def _rebuild(
    cls: type[KcodecError], state: dict[str, Any], args: tuple[Any, ...]
) -> KcodecError:
    obj = cls.__new__(cls)
    Exception.__init__(obj, *args)
    obj.__dict__.update(state)
    return obj


def _at(offset: int | None) -> str:
    return "" if offset is None else f" at offset {offset}"


class DecodeError(KcodecError, ValueError):
    """The bytes cannot be decoded. ``offset`` is where the problem was found, if known."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message + _at(offset))


class TruncatedError(DecodeError):
    """The input ended early: ``need`` bytes were required at ``offset``, ``available`` remain."""

    def __init__(self, need: int, offset: int, available: int, what: str = "data") -> None:
        self.need = need
        self.available = available
        self.what = what
        DecodeError.__init__(
            self, f"truncated {what}: need {need} bytes, {available} available", offset
        )


class CorruptDataError(DecodeError):
    """The bytes are complete but impossible: bad magic, bad length, over-long varint, ..."""


class ChecksumError(CorruptDataError):
    """A CRC did not match. ``expected`` is the stored value, ``actual`` the computed one."""

    def __init__(
        self, expected: int, actual: int, offset: int | None = None, what: str = "CRC"
    ) -> None:
        self.expected = expected
        self.actual = actual
        self.what = what
        DecodeError.__init__(
            self, f"{what} mismatch: stored 0x{expected:08x}, computed 0x{actual:08x}", offset
        )


class UnsupportedCodecError(DecodeError):
    """An unknown compression codec id, or a codec whose library is not installed."""

    def __init__(self, codec: Any, package: str | None = None, offset: int | None = None) -> None:
        self.codec = codec
        self.package = package
        if package:
            msg = f"compression codec {codec!r} needs the {package!r} package: pip install {package}"
        else:
            msg = f"unknown compression codec {codec!r}"
        DecodeError.__init__(self, msg, offset)


class DecompressionLimitError(DecodeError):
    """Decompressing would produce more than ``limit`` bytes."""

    def __init__(self, codec: str, limit: int, offset: int | None = None) -> None:
        self.codec = codec
        self.limit = limit
        DecodeError.__init__(
            self, f"{codec} output would exceed the limit of {limit} bytes", offset
        )


class DecodeLimitError(DecodeError):
    """A decode's ``limits`` allow at most ``limit`` elements in the arrays named ``what``
    (all of them in one decode, together), and the input holds more: ``count`` would be
    reached by the array whose count prefix is at ``offset``. Raised before the array is
    allocated."""

    def __init__(self, what: str, count: int, limit: int, offset: int | None = None) -> None:
        self.what = what
        self.count = count
        self.limit = limit
        DecodeError.__init__(
            self, f"{what}: {count} elements, more than the limit of {limit}", offset)


class FetchedBatchError(DecodeError):
    """A record batch a consumer fetched does not decode (a CRC mismatch, corrupt or
    truncated inside): ``topic``, ``partition``, ``fetch_offset`` (the consumer's position,
    where the batch is) and ``cause`` (the decode error's text). The consumer stays there."""

    def __init__(self, topic: str, partition: int, fetch_offset: int, cause: str) -> None:
        self.topic = topic
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.cause = cause
        DecodeError.__init__(
            self, f"a record batch of {topic}[{partition}] at offset {fetch_offset} does not "
                  f"decode ({cause}); the consumer stays at that offset: seek past the batch to "
                  f"skip it, or inspect the partition (kcodec dump-log on the broker's segment)")


class EncodeError(KcodecError, ValueError):
    """A value cannot be encoded: out of range for its wire type, wrong type, too long."""


class EncodeTypeError(EncodeError, TypeError):
    """A value of the wrong type for its field (a str where bytes go, a float for an int).
    Also a TypeError, so callers that expect Python's own error for a wrong type get it."""


class UnsupportedVersionError(KcodecError):
    """An API version, or a field in that version, that the message does not support."""


class ProtocolError(KcodecError):
    """A peer broke the Kafka protocol: garbage, a truncated frame, a wrong correlation id."""
