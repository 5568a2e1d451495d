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
message (about 10x cheaper to read back)::

    many      := version:u8 (2) count:u32 topic_count:u16 str16*topic_count
                 topic_index:u16[count] attempts:u16[count] partition:i32[count]
                 offset:i64[count] timestamp:i64[count] timestamp_type:i8[count]
                 not_before:i64[count] key_len:i32[count] value_len:i32[count]
                 headers_len:i32[count] error_len:i32[count]
                 keys values headers errors          (each the concatenated bytes)
    headers   := header_count:u16 header*             (one message's; length 0: none)

A length of -1 is null (key, value, error); every column's total is checked against the
bytes before anything is sliced.
"""

from __future__ import annotations

import struct
from functools import partial
from itertools import accumulate
from typing import Any, NamedTuple

from kcodec.errors import CorruptDataError, TruncatedError

__all__ = ["Message", "encode", "decode", "encode_many", "decode_many"]

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
MANY_VERSION = 2
_MANY_HEAD = struct.Struct(">BIH")
# the fixed-size columns, in order: (struct code, bytes an item)
_COLUMNS = (("H", 2), ("H", 2), ("i", 4), ("q", 8), ("q", 8), ("b", 1), ("q", 8),
            ("i", 4), ("i", 4), ("i", 4), ("i", 4))
_PER_MESSAGE = sum(n for _, n in _COLUMNS)


def _headers_blob(headers: Any) -> bytes:
    if not headers:
        return b""
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"a message has {len(headers)} headers; at most {MAX_HEADERS} can be stored")
    parts = [_U16.pack(len(headers))]
    for k, v in headers:
        kb = k.encode() if isinstance(k, str) else bytes(k)
        parts += [_U16.pack(len(kb)), kb, _bytes32(v)]
    return b"".join(parts)


def encode_many(messages: list[Message]) -> bytes:
    """``messages`` as one blob (the columns above); ``decode_many`` reads it back."""
    n = len(messages)
    if not n:
        return _MANY_HEAD.pack(MANY_VERSION, 0, 0)
    # one C-level transpose: a tuple per field
    (topic_col, parts_col, offs, ts, tts, keys, values, hdr_col, att, err_col,
     nbs) = zip(*messages, strict=False)
    names = list(dict.fromkeys(topic_col))
    if len(names) > 0xFFFF:
        raise ValueError(f"{len(names)} topics in one batch; at most 65535 can be stored")
    if len(names) == 1:
        tix: Any = (0,) * n
    else:
        where = {t: i for i, t in enumerate(names)}
        tix = [where[t] for t in topic_col]
    hdrs = [_headers_blob(h) if h else b"" for h in hdr_col] if any(hdr_col) else None
    errs = None if err_col.count(None) == n else \
        [None if e is None else e.encode("utf-8", "replace") for e in err_col]
    if max(att) > 0xFFFF:
        att = tuple(min(a, 0xFFFF) for a in att)
    out = [_MANY_HEAD.pack(MANY_VERSION, n, len(names))]
    for t in names:
        tb = t.encode()
        out += [_U16.pack(len(tb)), tb]
    out += [struct.pack(f">{n}H", *tix), struct.pack(f">{n}H", *att),
            struct.pack(f">{n}i", *parts_col), struct.pack(f">{n}q", *offs),
            struct.pack(f">{n}q", *ts), struct.pack(f">{n}b", *tts),
            struct.pack(f">{n}q", *nbs),
            struct.pack(f">{n}i", *[-1 if k is None else len(k) for k in keys]),
            struct.pack(f">{n}i", *[-1 if v is None else len(v) for v in values]),
            struct.pack(f">{n}i", *([len(h) for h in hdrs] if hdrs is not None else (0,) * n)),
            struct.pack(f">{n}i", *([-1 if e is None else len(e) for e in errs]
                                    if errs is not None else (-1,) * n)),
            b"".join([k for k in keys if k]), b"".join([v for v in values if v])]
    if hdrs is not None:
        out.append(b"".join(hdrs))
    if errs is not None:
        out.append(b"".join([e for e in errs if e]))
    return b"".join(out)


def _slices(data: bytes, start: int, lens: tuple, what: str) -> tuple[list, int]:
    """The pieces ``lens`` (-1: None) cut from ``data`` at ``start``; their end."""
    if not lens:
        return [], start
    low, high = min(lens), max(lens)
    if low < -1:
        raise CorruptDataError(f"stored messages: an impossible {what} length", start)
    if high <= 0:                       # all null or empty (errors, headers: the usual)
        return [None if n == -1 else b"" for n in lens] if low == -1 else [b""] * len(lens), start
    sizes = lens if low >= 0 else [n if n > 0 else 0 for n in lens]
    total = sum(sizes)
    if start + total > len(data):
        raise TruncatedError(total, start, len(data) - start, f"stored messages' {what}s")
    ends = list(accumulate(sizes, initial=start))
    out: list[bytes | None] = [data[a:b] for a, b in zip(ends, ends[1:], strict=False)]
    if low == -1:
        out = [None if n == -1 else piece for n, piece in zip(lens, out, strict=False)]
    return out, start + total


def _headers_from(blob: bytes) -> list:
    if not blob:
        return []
    size = len(blob)
    (count,) = _U16.unpack_from(blob, 0)
    pos = 2
    out = []
    for _ in range(count):
        if pos + 2 > size:
            raise TruncatedError(2, pos, size - pos, "stored message header key")
        (klen,) = _U16.unpack_from(blob, pos)
        pos += 2
        if pos + klen > size:
            raise TruncatedError(klen, pos, size - pos, "stored message header key")
        hk = blob[pos:pos + klen].decode()
        hv, pos = _bytes32_at(blob, pos + klen, size, "header value")
        out.append((hk, hv))
    if pos != size:
        raise CorruptDataError(f"stored message headers: {size - pos} bytes after their end", pos)
    return out


_make = partial(tuple.__new__, Message)


def decode_many(data: bytes) -> list[Message]:
    """What ``encode_many`` wrote; ``CorruptDataError``/``TruncatedError`` when the bytes are
    not that (each count and length checked against the bytes left before it is used)."""
    if type(data) is not bytes:
        data = bytes(data)
    size = len(data)
    if size < _MANY_HEAD.size:
        raise TruncatedError(_MANY_HEAD.size, 0, size, "stored messages' header")
    version, n, tcount = _MANY_HEAD.unpack_from(data)
    if version != MANY_VERSION:
        raise CorruptDataError(f"stored messages: unknown version {version}", 0)
    pos = _MANY_HEAD.size
    try:
        names = []
        for _ in range(tcount):
            if pos + 2 > size:
                raise TruncatedError(2, pos, size - pos, "stored messages' topic")
            (tl,) = _U16.unpack_from(data, pos)
            pos += 2
            if pos + tl > size:
                raise TruncatedError(tl, pos, size - pos, "stored messages' topic")
            names.append(data[pos:pos + tl].decode())
            pos += tl
        if pos + n * _PER_MESSAGE > size:
            raise TruncatedError(n * _PER_MESSAGE, pos, size - pos, "stored messages' columns")
        cols = []
        for code, width in _COLUMNS:
            cols.append(struct.unpack_from(f">{n}{code}", data, pos))
            pos += n * width
        tix, attempts, parts, offs, ts, tts, nbs, klen, vlen, hlen, elen = cols
        if tix and max(tix) >= tcount:
            raise CorruptDataError("stored messages: a topic index past the topics", pos)
        keys, pos = _slices(data, pos, klen, "key")
        values, pos = _slices(data, pos, vlen, "value")
        hblobs, pos = _slices(data, pos, hlen, "headers")
        ebytes, pos = _slices(data, pos, elen, "error")
        headers = [_headers_from(h) if h else [] for h in hblobs] if max(hlen, default=0) > 0 else \
            [[] for _ in range(n)]
        errors = ebytes if ebytes.count(None) == n else \
            [None if e is None else e.decode("utf-8", "replace") for e in ebytes]
        topics = [names[i] for i in tix] if tcount > 1 else [names[0]] * n if n else []
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"stored messages: a name is not UTF-8 ({exc.reason})", pos) from None
    if pos != size:
        raise CorruptDataError(f"stored messages: {size - pos} bytes after their end", pos)
    return list(map(_make, zip(topics, parts, offs, ts, tts, keys, values, headers, attempts,
                               errors, nbs, strict=False)))
