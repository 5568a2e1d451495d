"""The record a handler receives, and its bytes in a runtime store.

A stored message (big-endian; ``str`` is UTF-8)::

    message   := version:u8 (1) attempts:u16 partition:i32 offset:i64 timestamp:i64
                 timestamp_type:i8 not_before:i64 topic:str16
                 key:bytes32 value:bytes32 header_count:u16 header* error:str32
    header    := key:str16 value:bytes32
    str16     := length:u16 byte*
    bytes32   := length:i32 byte*        (length -1: null)
    str32     := length:i32 byte*        (length -1: null)

``not_before`` (ms since the epoch, 0: now) delays a retried message; ``error`` is the last
failure's text (for the dead-letter headers and ``kcodec ctl``).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kcodec.errors import CorruptDataError, TruncatedError

__all__ = ["Message", "encode", "decode"]

VERSION = 1
_HEAD = struct.Struct(">BHiqqbqH")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
MAX_HEADERS = 0xFFFF


class Message(NamedTuple):
    """One Kafka record as the handler sees it.

    ``attempts`` counts earlier deliveries to a handler that failed (0 on the first);
    ``error`` is the last failure's text (None on the first delivery)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: Any          # bytes or None as fetched; str or JSON data with --decode utf8|json
    headers: list
    attempts: int = 0
    error: str | None = None
    not_before: int = 0


def _bytes32(b: bytes | None) -> bytes:
    if b is None:
        return b"\xff\xff\xff\xff"
    return _I32.pack(len(b)) + b


def encode(m: Message) -> bytes:
    topic = m.topic.encode()
    parts = [_HEAD.pack(VERSION, min(m.attempts, 0xFFFF), m.partition, m.offset, m.timestamp,
                        m.timestamp_type, m.not_before, len(topic)), topic,
             _bytes32(m.key), _bytes32(m.value)]
    headers = m.headers or ()
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"a message has {len(headers)} headers; at most {MAX_HEADERS} can be stored")
    parts.append(_U16.pack(len(headers)))
    for k, v in headers:
        kb = k.encode() if isinstance(k, str) else bytes(k)
        parts += [_U16.pack(len(kb)), kb, _bytes32(v)]
    parts.append(_bytes32(None if m.error is None else m.error.encode("utf-8", "replace")))
    return b"".join(parts)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise TruncatedError(n, self.pos, len(self.data) - self.pos, f"stored message {what}")
        b = self.data[self.pos:end]
        self.pos = end
        return b

    def u16(self, what: str) -> int:
        return int(_U16.unpack(self.take(2, what))[0])

    def bytes32(self, what: str) -> bytes | None:
        n = _I32.unpack(self.take(4, what))[0]
        if n == -1:
            return None
        if n < -1:
            raise CorruptDataError(f"stored message {what}: impossible length {n}", self.pos - 4)
        return self.take(n, what)


def decode(data: bytes) -> Message:
    """A stored message back; ``CorruptDataError``/``TruncatedError`` when the bytes are not one."""
    data = bytes(data)
    r = _Reader(data)
    version, attempts, partition, offset, ts, ts_type, not_before, tlen = \
        _HEAD.unpack(r.take(_HEAD.size, "header"))
    if version != VERSION:
        raise CorruptDataError(f"stored message: unknown version {version}", 0)
    try:
        topic = r.take(tlen, "topic").decode()
        key = r.bytes32("key")
        value = r.bytes32("value")
        headers = []
        for _ in range(r.u16("header count")):
            hk = r.take(r.u16("header key"), "header key").decode()
            headers.append((hk, r.bytes32("header value")))
        err = r.bytes32("error")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"stored message: a name is not UTF-8 ({exc.reason})", r.pos) from None
    if r.pos != len(data):
        raise CorruptDataError(f"stored message: {len(data) - r.pos} bytes after its end", r.pos)
    return Message(topic, partition, offset, ts, ts_type, key, value, headers, attempts,
                   None if err is None else err.decode("utf-8", "replace"), not_before)
