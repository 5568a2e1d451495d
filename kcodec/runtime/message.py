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

Many messages at once (``encode_many``: a store's chunk, what one append writes) go in
columns, so both ends do a few C-level calls a column instead of a dozen Python steps a
message; kcodec._py.msgcols draws that layout, and it has a compiled twin.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kcodec.errors import CorruptDataError, TruncatedError
from kcodec.runtime._msgcols import MAX_HEADERS
from kcodec.runtime._msgcols import decode_many as _decode_many
from kcodec.runtime._msgcols import encode_many as _encode_many
from kcodec.runtime._msgcols import from_records as _from_records

__all__ = ["Message", "encode", "decode", "encode_many", "decode_many", "from_records"]

VERSION = 1
_HEAD = struct.Struct(">BHiqqbqH")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


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


def decode(data: bytes) -> Message:
    """A stored message back; ``CorruptDataError``/``TruncatedError`` when the bytes are not one.

    Every length is checked against the bytes left before it is used (a sinker decodes
    every message it claims: this is the store's hot path, so it reads with offsets)."""
    if type(data) is not bytes:
        data = bytes(data)
    size = len(data)
    if size < _HEAD.size:
        raise TruncatedError(_HEAD.size, 0, size, "stored message header")
    version, attempts, partition, offset, ts, ts_type, not_before, tlen = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptDataError(f"stored message: unknown version {version}", 0)
    pos = _HEAD.size
    try:
        end = pos + tlen
        if end > size:
            raise TruncatedError(tlen, pos, size - pos, "stored message topic")
        topic = data[pos:end].decode()
        pos = end
        key, pos = _bytes32_at(data, pos, size, "key")
        value, pos = _bytes32_at(data, pos, size, "value")
        if pos + 2 > size:
            raise TruncatedError(2, pos, size - pos, "stored message header count")
        (count,) = _U16.unpack_from(data, pos)
        pos += 2
        headers = []
        for _ in range(count):
            if pos + 2 > size:
                raise TruncatedError(2, pos, size - pos, "stored message header key")
            (klen,) = _U16.unpack_from(data, pos)
            pos += 2
            if pos + klen > size:
                raise TruncatedError(klen, pos, size - pos, "stored message header key")
            hk = data[pos:pos + klen].decode()
            hv, pos = _bytes32_at(data, pos + klen, size, "header value")
            headers.append((hk, hv))
        err, pos = _bytes32_at(data, pos, size, "error")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"stored message: a name is not UTF-8 ({exc.reason})", pos) from None
    if pos != size:
        raise CorruptDataError(f"stored message: {size - pos} bytes after its end", pos)
    return _new(Message, (topic, partition, offset, ts, ts_type, key, value, headers, attempts,
                          None if err is None else err.decode("utf-8", "replace"), not_before))


_new = tuple.__new__    # a namedtuple's own __new__ costs a Python frame per message


def _bytes32_at(data: bytes, pos: int, size: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > size:
        raise TruncatedError(4, pos, size - pos, f"stored message {what}")
    (n,) = _I32.unpack_from(data, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < -1:
        raise CorruptDataError(f"stored message {what}: impossible length {n}", pos - 4)
    end = pos + n
    if end > size:
        raise TruncatedError(n, pos, size - pos, f"stored message {what}")
    return data[pos:end], end


# ---------------------------------------------------------------------- many at once
def encode_many(messages: list[Message]) -> bytes:
    """``messages`` as one blob (columns: kcodec._py.msgcols); ``decode_many`` reads it back."""
    return _encode_many(messages)


def decode_many(data: bytes) -> list[Message]:
    """What ``encode_many`` wrote; ``CorruptDataError``/``TruncatedError`` when the bytes are
    not that (each count and length checked against the bytes left before it is used)."""
    return _decode_many(data, Message)


def from_records(topic: str, partition: int, records: list) -> list[Message]:
    """A consumer's ``records`` of one partition as new Messages (not yet tried), made at
    C level in the compiled twin: what a puller holds until the handler or the store has
    them."""
    return _from_records(topic, partition, records, Message)
