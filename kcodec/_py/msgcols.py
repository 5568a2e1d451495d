"""Many runtime messages at once, in columns: what a ``kcodec run`` store writes per chunk
(pure-Python twin; ``kcodec._cy.msgcols`` is the compiled one, same bytes, same objects,
same errors).

The messages are the runtime's ``Message`` tuples (kcodec.runtime.message): topic,
partition, offset, timestamp, timestamp_type, key, value, headers, attempts, error,
not_before. Big-endian; ``str`` is UTF-8::

    many      := version:u8 (2) count:u32 topic_count:u16 str16*topic_count
                 topic_index:u16[count] attempts:u16[count] partition:i32[count]
                 offset:i64[count] timestamp:i64[count] timestamp_type:i8[count]
                 not_before:i64[count] key_len:i32[count] value_len:i32[count]
                 headers_len:i32[count] error_len:i32[count]
                 keys values headers errors          (each the concatenated bytes)
    headers   := header_count:u16 header*             (one message's; length 0: none)
    header    := key:str16 value:bytes32
    str16     := length:u16 byte*
    bytes32   := length:i32 byte*                     (length -1: null)

A length of -1 is null (key, value, error); every column's total is checked against the
bytes before anything is sliced. Attempts above 0xFFFF are stored as 0xFFFF. Columns let
both ends do a few C-level calls a column instead of a dozen Python steps a message.
"""

from __future__ import annotations

import struct
from functools import partial
from itertools import accumulate
from typing import Any

from kcodec.errors import CorruptDataError, TruncatedError

__all__ = ["MANY_VERSION", "MAX_HEADERS", "encode_many", "decode_many", "from_records"]

MANY_VERSION = 2
MAX_HEADERS = 0xFFFF
MAX_TOPICS = 0xFFFF
_MANY_HEAD = struct.Struct(">BIH")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
# the fixed-size columns, in order: (struct code, bytes an item)
_COLUMNS = (("H", 2), ("H", 2), ("i", 4), ("q", 8), ("q", 8), ("b", 1), ("q", 8),
            ("i", 4), ("i", 4), ("i", 4), ("i", 4))
_PER_MESSAGE = sum(n for _, n in _COLUMNS)


def _bytes32(b: bytes | None) -> bytes:
    if b is None:
        return b"\xff\xff\xff\xff"
    return _I32.pack(len(b)) + b


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


def encode_many(messages: list) -> bytes:
    """``messages`` (Message tuples) as one blob (the columns above); ``decode_many`` reads
    it back."""
    n = len(messages)
    if not n:
        return _MANY_HEAD.pack(MANY_VERSION, 0, 0)
    # one C-level transpose: a tuple per field
    (topic_col, parts_col, offs, ts, tts, keys, values, hdr_col, att, err_col,
     nbs) = zip(*messages, strict=False)
    names = list(dict.fromkeys(topic_col))
    if len(names) > MAX_TOPICS:
        raise ValueError(f"{len(names)} topics in one batch; at most {MAX_TOPICS} can be stored")
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


def _lengths(lens: tuple, start: int, size: int, what: str) -> tuple[list | None, int]:
    """The ends of the pieces ``lens`` (-1: null) from ``start`` (None when none has a
    byte), and where they end; checked against ``size`` before anything is sliced."""
    if not lens:
        return None, start
    low, high = min(lens), max(lens)
    if low < -1:
        raise CorruptDataError(f"stored messages: an impossible {what} length", start)
    if high <= 0:                       # all null or empty (errors, headers: the usual)
        return None, start
    sizes = lens if low >= 0 else [n if n > 0 else 0 for n in lens]
    total = sum(sizes)
    if start + total > size:
        raise TruncatedError(total, start, size - start, f"stored messages' {what}s")
    return list(accumulate(sizes, initial=start)), start + total


def _slices(data: bytes, lens: tuple, ends: list | None) -> list:
    """The pieces ``lens`` (-1: None) of ``data`` between ``ends``."""
    if ends is None:
        return [None if n == -1 else b"" for n in lens] if -1 in lens else [b""] * len(lens)
    out: list[bytes | None] = [data[a:b] for a, b in zip(ends, ends[1:], strict=False)]
    if min(lens) == -1:
        out = [None if n == -1 else piece for n, piece in zip(lens, out, strict=False)]
    return out


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


def _headers_at(data: bytes, pos: int, size: int) -> list:
    """One message's headers: the blob ``data[pos:size]`` (offsets in errors are in data)."""
    if pos + 2 > size:
        raise TruncatedError(2, pos, size - pos, "stored message header count")
    (count,) = _U16.unpack_from(data, pos)
    pos += 2
    out = []
    for _ in range(count):
        if pos + 2 > size:
            raise TruncatedError(2, pos, size - pos, "stored message header key")
        (klen,) = _U16.unpack_from(data, pos)
        pos += 2
        if pos + klen > size:
            raise TruncatedError(klen, pos, size - pos, "stored message header key")
        hk = _name(data, pos, pos + klen)
        hv, pos = _bytes32_at(data, pos + klen, size, "header value")
        out.append((hk, hv))
    if pos != size:
        raise CorruptDataError(f"stored message headers: {size - pos} bytes after their end", pos)
    return out


def _name(data: bytes, start: int, end: int) -> str:
    try:
        return data[start:end].decode()
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"stored messages: a name is not UTF-8 ({exc.reason})",
                               start) from None


def decode_many(data: Any, message_type: type) -> list:
    """What ``encode_many`` wrote, as ``message_type`` tuples (the runtime's Message);
    ``CorruptDataError``/``TruncatedError`` when the bytes are not that (each count and
    length checked against the bytes left before it is used)."""
    if type(data) is not bytes:
        data = bytes(data)
    size = len(data)
    if size < _MANY_HEAD.size:
        raise TruncatedError(_MANY_HEAD.size, 0, size, "stored messages' header")
    version, n, tcount = _MANY_HEAD.unpack_from(data)
    if version != MANY_VERSION:
        raise CorruptDataError(f"stored messages: unknown version {version}", 0)
    pos = _MANY_HEAD.size
    names = []
    for _ in range(tcount):
        if pos + 2 > size:
            raise TruncatedError(2, pos, size - pos, "stored messages' topic")
        (tl,) = _U16.unpack_from(data, pos)
        pos += 2
        if pos + tl > size:
            raise TruncatedError(tl, pos, size - pos, "stored messages' topic")
        names.append(_name(data, pos, pos + tl))
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
    kends, pos = _lengths(klen, pos, size, "key")
    vends, pos = _lengths(vlen, pos, size, "value")
    hends, pos = _lengths(hlen, pos, size, "header")
    eends, pos = _lengths(elen, pos, size, "error")
    keys = _slices(data, klen, kends)
    values = _slices(data, vlen, vends)
    if hends is None:
        headers: list = [[] for _ in range(n)]
    else:
        headers = [_headers_at(data, a, b) if a != b else []
                   for a, b in zip(hends, hends[1:], strict=False)]
    ebytes = _slices(data, elen, eends)
    errors = ebytes if ebytes.count(None) == n else \
        [None if e is None else e.decode("utf-8", "replace") for e in ebytes]
    topics = [names[i] for i in tix] if tcount > 1 else [names[0]] * n if n else []
    if pos != size:
        raise CorruptDataError(f"stored messages: {size - pos} bytes after their end", pos)
    # tuple.__new__ straight: a namedtuple's own __new__ costs a Python frame a message
    return list(map(partial(tuple.__new__, message_type),
                    zip(topics, parts, offs, ts, tts, keys, values, headers, attempts, errors,
                        nbs, strict=False)))


def from_records(topic: str, partition: int, records: Any, message_type: type) -> list:
    """``records`` (a consumer's, of one partition) as new ``message_type`` tuples: the
    record's offset, timestamp, timestamp type, key, value and headers (the same list),
    no attempts, no error, not delayed. What a puller holds until its store has them."""
    new = tuple.__new__
    return [new(message_type, (topic, partition, r.offset, r.timestamp, r.timestamp_type,
                               r.key, r.value, r.headers, 0, None, 0)) for r in records]
