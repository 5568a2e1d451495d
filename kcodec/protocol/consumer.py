"""The consumer protocol's subscription and assignment, as carried inside group APIs.

JoinGroup's protocol metadata and SyncGroup's assignment are opaque bytes to the broker;
the consumer protocol fills them with a version-prefixed struct::

    versioned := int16 version, ConsumerProtocolSubscription | ConsumerProtocolAssignment

A newer peer may send a version above the one this library knows: like Kafka's own clients,
it is read as the highest known version and the extra trailing fields are ignored.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import TruncatedError, UnsupportedVersionError
from kcodec.protocol.messages_index import CLASSES

__all__ = ["ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "encode_versioned",
           "decode_versioned"]

ConsumerProtocolSubscription = CLASSES["ConsumerProtocolSubscription"]
ConsumerProtocolAssignment = CLASSES["ConsumerProtocolAssignment"]


def encode_versioned(msg: Any, version: int) -> bytes:
    """``int16 version`` + ``msg.encode(version)``."""
    body = msg.encode(version)
    return version.to_bytes(2, "big", signed=True) + body


def decode_versioned(cls: Any, buf: Any) -> tuple[int, Any]:
    """``(version, object)`` from version-prefixed bytes (see the module docstring)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
    if len(mv) < 2:
        raise TruncatedError(2, 0, len(mv), f"{cls.NAME} version")
    version = int.from_bytes(mv[0:2], "big", signed=True)
    if version < cls.MIN_VERSION:
        raise UnsupportedVersionError(f"{cls.NAME} version {version} is not supported")
    if version > cls.MAX_VERSION:
        return version, cls.decode_from(mv, cls.MAX_VERSION, 2)[0]
    from kcodec.protocol.engine import decode_struct

    return version, decode_struct(cls.plan(version), mv, 2, True)[0]
