"""Interpreter of protocol plans (see ``kcodec.protocol._plan``): the pure-Python twin.

Wire layout of a struct at one version (every choice resolved in the plan)::

    struct        := field* [tagged_fields]              tagged_fields only if flexible
    field         := int8 | int16 | int32 | int64 | uint16 | uint32 | float64 | bool | uuid
                   | uvarint | string | bytes | array | struct | nullable_struct
    string        := int16 len (-1 null) utf8[len]       | compact: uvarint(len+1) utf8[len]
    bytes         := int32 len (-1 null) byte[len]       | compact: uvarint(len+1) byte[len]
    records       := bytes (a read-only input decodes to a memoryview slice, no copy)
    array         := int32 n (-1 null) elem[n]           | compact: uvarint(n+1) elem[n]
    nullable_struct := int8 (-1 null | 1) [struct]
    tagged_fields := uvarint count { uvarint tag, uvarint size, byte[size] }

Decoding checks every length and count against the bytes that remain before allocating
(an array of n elements needs at least n * min_element_size bytes). ``limits`` (optional)
caps the elements of the arrays of a field path (``"MetadataResponse.topics"``), summed
over the whole decode: a count past it raises DecodeLimitError before allocating, which
bounds what a hostile answer can make the decoded form cost; the key ALL_ITEMS (``"*"``)
caps every array element and tagged field of the message together. A struct has at most
MAX_TAGGED_FIELDS tagged fields whatever the limits. Errors: TruncatedError,
CorruptDataError, DecodeLimitError (kcodec.errors), with the same text as the compiled twin.
Encoding: EncodeError for values that do not fit their wire type, UnsupportedVersionError
for non-default values in fields the version lacks (unless ignorable).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kcodec.errors import (
    CorruptDataError,
    DecodeLimitError,
    EncodeError,
    TruncatedError,
    UnsupportedVersionError,
)

__all__ = ["encode_struct", "decode_struct", "MAX_TAGGED_FIELDS", "ALL_ITEMS"]

#: tagged fields one struct may carry (Kafka's messages have a handful; the bound keeps a
#: section of a hundred thousand empty unknown tags from costing a hundred thousand objects)
MAX_TAGGED_FIELDS = 1024
#: the ``limits`` key that caps all array elements and tagged fields of a message together
ALL_ITEMS = "*"

# Wire codes: the same numbers as kcodec.protocol._plan (a test checks they agree).
INT8, INT16, INT32, INT64, UINT16, UINT32, FLOAT64, BOOL, UUID, UVARINT = range(1, 11)
STRING, CSTRING, BYTES, CBYTES, ARRAY, CARRAY, STRUCT, RECORDS, CRECORDS = range(11, 20)

_FMT = {INT8: ">b", INT16: ">h", INT32: ">i", INT64: ">q", UINT16: ">H", UINT32: ">I",
        FLOAT64: ">d", BOOL: ">B"}
_SIZE = {INT8: 1, INT16: 2, INT32: 4, INT64: 8, UINT16: 2, UINT32: 4, FLOAT64: 8, BOOL: 1,
         UUID: 16, UVARINT: 1, STRING: 2, CSTRING: 1, BYTES: 4, CBYTES: 1, ARRAY: 4, CARRAY: 1,
         RECORDS: 4, CRECORDS: 1}
_RANGE = {INT8: (-(1 << 7), (1 << 7) - 1, "int8"), INT16: (-(1 << 15), (1 << 15) - 1, "int16"),
          INT32: (-(1 << 31), (1 << 31) - 1, "int32"), INT64: (-(1 << 63), (1 << 63) - 1, "int64"),
          UINT16: (0, 0xFFFF, "uint16"), UINT32: (0, 0xFFFFFFFF, "uint32"),
          UVARINT: (0, 0xFFFFFFFF, "uvarint")}
_STRUCTS = {c: struct.Struct(f) for c, f in _FMT.items()}
_U32 = struct.Struct(">I")

_UUID_NEW = uuid.UUID.__new__
_NEW = object.__new__
_SET = object.__setattr__
_SAFE = uuid.SafeUUID.unknown


def _make_uuid(b: bytes) -> uuid.UUID:
    u = _UUID_NEW(uuid.UUID)
    _SET(u, "int", int.from_bytes(b, "big"))
    _SET(u, "is_safe", _SAFE)
    return u


# ----------------------------------------------------------------------------- encoding


def _type_name(v: Any) -> str:
    return type(v).__name__


def _put_uvar(out: bytearray, u: int) -> None:
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _enc_value(out: bytearray, code: int, v: Any, nullable: bool, sub: Any, what: str,
               elem: int) -> None:
    if code <= BOOL:
        if code == FLOAT64:
            if not isinstance(v, (float, int)) or isinstance(v, bool):
                raise EncodeError(f"{what}: expected float, got {_type_name(v)}")
            try:
                f = float(v)
            except OverflowError:
                raise EncodeError(f"{what}: value out of range for float64") from None
            out += _STRUCTS[FLOAT64].pack(f)
            return
        if code == BOOL:
            if not isinstance(v, int):
                raise EncodeError(f"{what}: expected bool, got {_type_name(v)}")
            out.append(1 if v else 0)
            return
        if not isinstance(v, int):
            raise EncodeError(f"{what}: expected int, got {_type_name(v)}")
        lo, hi, kind = _RANGE[code]
        if v < lo or v > hi:
            raise EncodeError(f"{what}: value {v} out of range for {kind} ({lo}..{hi})")
        out += _STRUCTS[code].pack(v)
        return
    if code == UUID:
        if not isinstance(v, uuid.UUID):
            raise EncodeError(f"{what}: expected uuid.UUID, got {_type_name(v)}")
        out += v.bytes
        return
    if code == UVARINT:
        if not isinstance(v, int):
            raise EncodeError(f"{what}: expected int, got {_type_name(v)}")
        if v < 0 or v > 0xFFFFFFFF:
            raise EncodeError(f"{what}: value {v} out of range for uvarint (0..4294967295)")
        _put_uvar(out, v)
        return
    if v is None:
        if not nullable:
            raise EncodeError(f"{what}: None is not allowed (not nullable in this version)")
        if code == STRING:
            out += b"\xff\xff"
        elif code == BYTES or code == ARRAY or code == RECORDS:
            out += b"\xff\xff\xff\xff"
        elif code == STRUCT:
            out.append(0xFF)
        else:
            out.append(0)
        return
    if code == STRING or code == CSTRING:
        if not isinstance(v, str):
            raise EncodeError(f"{what}: expected str, got {_type_name(v)}")
        try:
            b = v.encode("utf-8")
        except UnicodeEncodeError:
            raise EncodeError(f"{what}: string is not encodable as UTF-8") from None
        n = len(b)
        if code == STRING:
            if n > 0x7FFF:
                raise EncodeError(f"{what}: string of {n} bytes is longer than 32767")
            out += _STRUCTS[INT16].pack(n)
        else:
            if n > 0x7FFFFFFE:
                raise EncodeError(f"{what}: string of {n} bytes is too long")
            _put_uvar(out, n + 1)
        out += b
        return
    if code == BYTES or code == CBYTES or code == RECORDS or code == CRECORDS:
        try:
            mv = memoryview(v)
        except TypeError:
            raise EncodeError(f"{what}: expected a bytes-like object, got {_type_name(v)}") from None
        n = mv.nbytes
        if n > 0x7FFFFFFE:
            raise EncodeError(f"{what}: {n} bytes is too long")
        if code == BYTES or code == RECORDS:
            out += _U32.pack(n)
        else:
            _put_uvar(out, n + 1)
        out += mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
        return
    if code == STRUCT:
        if nullable:
            out.append(1)
        _enc_struct(out, sub, v)
        return
    # ARRAY / CARRAY
    if not isinstance(v, (list, tuple)):
        raise EncodeError(f"{what}: expected a list, got {_type_name(v)}")
    n = len(v)
    if n > 0x7FFFFFFE:
        raise EncodeError(f"{what}: {n} elements is too many")
    if code == ARRAY:
        out += _U32.pack(n)
    else:
        _put_uvar(out, n + 1)
    if elem == STRUCT:
        for x in v:
            _enc_struct(out, sub, x)
    else:
        for x in v:
            _enc_value(out, elem, x, False, None, what, 0)


def _enc_struct(out: bytearray, plan: Any, obj: Any) -> None:
    if not isinstance(obj, plan.cls):
        raise EncodeError(f"{plan.name}: expected {plan.cls.__name__}, got {_type_name(obj)}")
    for key, default, ignorable, what in plan.absent:
        if not ignorable:
            v = getattr(obj, key, default)
            if v is not default and v != default:
                raise UnsupportedVersionError(
                    f"{what} is not supported in version {plan.version} (it has a non-default value)")
    for code, key, what, nullable, elem, sub, _tag, _default in plan.ops:
        try:
            v = getattr(obj, key)
        except AttributeError:
            raise EncodeError(f"{what}: the attribute is missing") from None
        _enc_value(out, code, v, nullable, sub, what, elem)
    if plan.flexible:
        _enc_tags(out, plan, obj)


def _enc_tags(out: bytearray, plan: Any, obj: Any) -> None:
    fields: list[tuple[int, bytes]] = []
    for code, key, what, nullable, elem, sub, tag, default in plan.tagged:
        v = getattr(obj, key, default)
        if v is default or v == default:
            continue
        buf = bytearray()
        _enc_value(buf, code, v, nullable, sub, what, elem)
        fields.append((tag, bytes(buf)))
    unknown = getattr(obj, "_unknown_tags", None)
    if unknown:
        for tag, raw in unknown.items():
            if tag not in plan.tag_map:
                fields.append((tag, bytes(raw)))
        fields.sort(key=lambda t: t[0])
    _put_uvar(out, len(fields))
    for tag, raw in fields:
        _put_uvar(out, tag)
        _put_uvar(out, len(raw))
        out += raw


def encode_struct(plan: Any, obj: Any) -> bytes:
    """Encode ``obj`` (an instance of ``plan.cls``) following ``plan``."""
    out = bytearray()
    _enc_struct(out, plan, obj)
    return bytes(out)


# ----------------------------------------------------------------------------- decoding


def _need(n: int, pos: int, end: int, what: str) -> None:
    if n > end - pos:
        raise TruncatedError(n, pos, end - pos, what)


def _uvar(buf: Any, pos: int, end: int, what: str) -> tuple[int, int]:
    start = pos
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise TruncatedError(pos - start + 1, start, end - start, what)
        b = buf[pos]
        pos += 1
        if pos - start == 5:
            if b & 0x80:
                raise CorruptDataError(f"{what} too long: more than 5 bytes", start)
            if b >> 4:
                raise CorruptDataError(f"{what} overflows 32 bits", start)
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _length(buf: Any, pos: int, end: int, code: int, what: str) -> tuple[int, int]:
    """The length (or count) prefix of a string/bytes/array; -1 means null."""
    if code == STRING:
        _need(2, pos, end, what)
        return _STRUCTS[INT16].unpack_from(buf, pos)[0], pos + 2
    if code == BYTES or code == ARRAY or code == RECORDS:
        _need(4, pos, end, what)
        return _STRUCTS[INT32].unpack_from(buf, pos)[0], pos + 4
    u, pos = _uvar(buf, pos, end, what)
    return u - 1, pos


def _dec_value(buf: Any, pos: int, end: int, code: int, nullable: bool, sub: Any, what: str,
               elem: int, lim: dict[str, list[int]] | None = None) -> tuple[Any, int]:
    if code <= BOOL:
        size = _SIZE[code]
        _need(size, pos, end, what)
        v = _STRUCTS[code].unpack_from(buf, pos)[0]
        if code == BOOL:
            v = v != 0
        return v, pos + size
    if code == UUID:
        _need(16, pos, end, what)
        return _make_uuid(bytes(buf[pos:pos + 16])), pos + 16
    if code == UVARINT:
        return _uvar(buf, pos, end, what)
    if code == STRUCT:
        if nullable:
            _need(1, pos, end, what)
            marker = buf[pos]
            pos += 1
            if marker & 0x80:  # a negative int8 means null, like Kafka's own readers
                return None, pos
        return _dec_struct(buf, pos, end, sub, lim)
    start = pos
    n, pos = _length(buf, pos, end, code, what)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        if n == -1:
            raise CorruptDataError(f"{what}: null in a non-nullable field", start)
        raise CorruptDataError(f"{what}: negative length {n}", start)
    if code == ARRAY or code == CARRAY:
        unit = sub.min_size if elem == STRUCT else _SIZE[elem]
        _need(n * (unit if unit > 0 else 1), pos, end, what)
        if lim is not None:
            if what in lim:
                _charge(lim, what, n, start)
            if ALL_ITEMS in lim:
                _charge_all(lim, what, n, start)
        out: list[Any] = []
        append = out.append
        if elem == STRUCT:
            for _ in range(n):
                v, pos = _dec_struct(buf, pos, end, sub, lim)
                append(v)
        else:
            for _ in range(n):
                v, pos = _dec_value(buf, pos, end, elem, False, None, what, 0)
                append(v)
        return out, pos
    _need(n, pos, end, what)
    if code == STRING or code == CSTRING:
        try:
            return str(buf[pos:pos + n], "utf-8"), pos + n
        except UnicodeDecodeError:
            raise CorruptDataError(f"{what}: invalid UTF-8", pos) from None
    if code >= RECORDS:
        if isinstance(buf, bytes):
            return memoryview(buf)[pos:pos + n], pos + n
        if buf.readonly:
            return buf[pos:pos + n], pos + n
    return bytes(buf[pos:pos + n]), pos + n


def _charge(lim: dict[str, list[int]], what: str, n: int, at: int) -> None:
    """Take ``n`` elements of ``what``'s allowance (``lim``: [left, limit] of each path)."""
    left, limit = lim[what]
    if n > left:
        raise DecodeLimitError(what, limit - left + n, limit, at)
    lim[what][0] = left - n


def _charge_all(lim: dict[str, list[int]], what: str, n: int, at: int) -> None:
    """Take ``n`` items of the message's allowance (``lim[ALL_ITEMS]``)."""
    left, limit = lim[ALL_ITEMS]
    if n > left:
        raise DecodeLimitError(f"{what} (with every array and tagged field of the message)",
                               limit - left + n, limit, at)
    lim[ALL_ITEMS][0] = left - n


def _dec_struct(buf: Any, pos: int, end: int, plan: Any,
                lim: dict[str, list[int]] | None = None) -> tuple[Any, int]:
    d = plan.defaults.copy()
    for key, factory in plan.fresh:
        d[key] = factory()
    for code, key, what, nullable, elem, sub, _tag, _default in plan.ops:
        d[key], pos = _dec_value(buf, pos, end, code, nullable, sub, what, elem, lim)
    if plan.flexible:
        pos = _dec_tags(buf, pos, end, plan, d, lim)
    else:
        d["_unknown_tags"] = None
    obj = _NEW(plan.cls)
    for key, value in d.items():
        _SET(obj, key, value)
    return obj, pos


def _dec_tags(buf: Any, pos: int, end: int, plan: Any, d: dict[str, Any],
              lim: dict[str, list[int]] | None = None) -> int:
    what = f"{plan.name} tagged fields"
    start = pos
    count, pos = _uvar(buf, pos, end, what)
    _need(count * 2, pos, end, what)
    if count > MAX_TAGGED_FIELDS:
        raise DecodeLimitError(what, count, MAX_TAGGED_FIELDS, start)
    if lim is not None and ALL_ITEMS in lim:
        _charge_all(lim, what, count, start)
    unknown = None
    tag_map = plan.tag_map
    for _ in range(count):
        tag, pos = _uvar(buf, pos, end, what)
        size, pos = _uvar(buf, pos, end, what)
        _need(size, pos, end, what)
        op = tag_map.get(tag)
        if op is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = bytes(buf[pos:pos + size])
            pos += size
            continue
        code, key, fwhat, nullable, elem, sub, _tag, _default = op
        stop = pos + size
        d[key], got = _dec_value(buf, pos, stop, code, nullable, sub, fwhat, elem, lim)
        if got != stop:
            raise CorruptDataError(f"{fwhat}: tagged field of {size} bytes has {stop - got} unread", pos)
        pos = stop
    d["_unknown_tags"] = unknown
    return pos


def decode_struct(plan: Any, buf: Any, pos: int = 0, exact: bool = True,
                  limits: Any = None) -> tuple[Any, int]:
    """Decode one ``plan.cls`` at ``pos`` of any bytes-like ``buf``: ``(object, next_pos)``.

    With ``exact``, bytes left after the struct are an error (CorruptDataError).
    ``limits``: a mapping of array field paths (``"MetadataResponse.topics"``) to the most
    elements those arrays may hold in all (DecodeLimitError past it); ``ALL_ITEMS``: the
    most array elements and tagged fields of the whole message.
    """
    lim = {what: [int(n), int(n)] for what, n in limits.items()} if limits else None
    if not isinstance(buf, bytes):
        try:
            mv = memoryview(buf)
        except TypeError:
            raise TypeError(f"a bytes-like object is required, not {type(buf).__name__!r}") from None
        buf = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    end = len(buf)
    if pos < 0 or pos > end:
        raise CorruptDataError(f"position {pos} outside a buffer of {end} bytes", pos)
    obj, pos = _dec_struct(buf, pos, end, plan, lim)
    if exact and pos != end:
        raise CorruptDataError(f"{end - pos} trailing bytes after {plan.name}", pos)
    return obj, pos
