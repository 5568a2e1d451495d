"""Kafka varints: unsigned varint, zigzag varint (32-bit) and zigzag varlong (64-bit).

Wire layout (protobuf base-128, least significant group first):

    uvarint  := { 1xxxxxxx } 0xxxxxxx         at most 5 bytes, value < 2**32
    varint   := uvarint(zigzag32(v))          v in [-2**31, 2**31)
    varlong  := uvarint64(zigzag64(v))        at most 10 bytes, v in [-2**63, 2**63)
    zigzag(v) = (v << 1) ^ (v >> (bits - 1))  0, -1, 1, -2, ... -> 0, 1, 2, 3, ...

Decoders take any buffer-protocol object and a position and return ``(value, next_pos)``.
They never read past the end, never loop past the byte limit, and reject encodings that are
too long or overflow the width: CorruptDataError; an input that ends mid-varint:
TruncatedError. Encoders range-check: EncodeError.

This is the pure-Python twin; ``kcodec._cy.varint`` must give the same results and errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import index as _index
from typing import Any

from kcodec._py._buf import byte_view
from kcodec.errors import CorruptDataError, DecodeError, EncodeError, TruncatedError

__all__ = [
    "encode_uvarint",
    "decode_uvarint",
    "uvarint_size",
    "encode_varint",
    "decode_varint",
    "varint_size",
    "encode_varlong",
    "decode_varlong",
    "varlong_size",
    "encode_varlongs",
    "decode_varlongs",
]

_U32_MAX = 0xFFFFFFFF
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_U64_MASK = (1 << 64) - 1


def _check_int(value: Any, kind: str, lo: int, hi: int) -> int:
    """The value as an int in [lo, hi] (anything with __index__ will do), or EncodeError."""
    if not isinstance(value, int):
        try:
            value = _index(value)
        except TypeError:
            raise EncodeError(f"{kind} value must be an int, not {type(value).__name__}") from None
    if value < lo or value > hi:
        raise EncodeError(f"value {value} out of range for {kind} ({lo}..{hi})")
    return value


def _encode_u(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _size_u(value: int) -> int:
    n = 1
    while value > 0x7F:
        value >>= 7
        n += 1
    return n


def _decode_u(buf: Any, pos: int, max_bytes: int, bits: int, kind: str) -> tuple[int, int]:
    pos = _index(pos)
    data = byte_view(buf)
    end = len(data)
    if pos < 0 or pos > end:
        raise DecodeError(f"position {pos} outside a buffer of {end} bytes", pos)
    result = 0
    shift = 0
    i = pos
    while True:
        if i >= end:
            raise TruncatedError(i - pos + 1, pos, end - pos, kind)
        b = data[i]
        i += 1
        if i - pos == max_bytes:
            if b & 0x80:
                raise CorruptDataError(f"{kind} too long: more than {max_bytes} bytes", pos)
            if b >> (bits - shift):
                raise CorruptDataError(f"{kind} overflows {bits} bits", pos)
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def encode_uvarint(value: int) -> bytes:
    """Unsigned varint of a value in [0, 2**32)."""
    return _encode_u(_check_int(value, "unsigned varint", 0, _U32_MAX))


def decode_uvarint(buf: Any, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned varint (at most 5 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode_u(buf, pos, 5, 32, "unsigned varint")


def uvarint_size(value: int) -> int:
    """Encoded size in bytes of an unsigned varint."""
    return _size_u(_check_int(value, "unsigned varint", 0, _U32_MAX))


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a value in [-2**31, 2**31)."""
    v = _check_int(value, "varint", _I32_MIN, _I32_MAX)
    return _encode_u(((v << 1) ^ (v >> 31)) & _U32_MAX)


def decode_varint(buf: Any, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag varint (at most 5 bytes) at ``pos``: ``(value, next_pos)``."""
    u, nxt = _decode_u(buf, pos, 5, 32, "varint")
    return (u >> 1) ^ -(u & 1), nxt


def varint_size(value: int) -> int:
    """Encoded size in bytes of a zigzag varint."""
    v = _check_int(value, "varint", _I32_MIN, _I32_MAX)
    return _size_u(((v << 1) ^ (v >> 31)) & _U32_MAX)


def encode_varlong(value: int) -> bytes:
    """Zigzag varlong of a value in [-2**63, 2**63)."""
    v = _check_int(value, "varlong", _I64_MIN, _I64_MAX)
    return _encode_u(((v << 1) ^ (v >> 63)) & _U64_MASK)


def decode_varlong(buf: Any, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag varlong (at most 10 bytes) at ``pos``: ``(value, next_pos)``."""
    u, nxt = _decode_u(buf, pos, 10, 64, "varlong")
    return (u >> 1) ^ -(u & 1), nxt


def varlong_size(value: int) -> int:
    """Encoded size in bytes of a zigzag varlong."""
    v = _check_int(value, "varlong", _I64_MIN, _I64_MAX)
    return _size_u(((v << 1) ^ (v >> 63)) & _U64_MASK)


def encode_varlongs(values: Iterable[int]) -> bytes:
    """Concatenated zigzag varlongs of every value, in order."""
    out = bytearray()
    for value in values:
        v = _check_int(value, "varlong", _I64_MIN, _I64_MAX)
        out += _encode_u(((v << 1) ^ (v >> 63)) & _U64_MASK)
    return bytes(out)


def decode_varlongs(buf: Any, count: int, pos: int = 0) -> tuple[list[int], int]:
    """Decode ``count`` consecutive zigzag varlongs at ``pos``: ``(values, next_pos)``."""
    count = _index(count)
    pos = _index(pos)
    if count < 0:
        raise DecodeError(f"negative count {count}", pos)
    data = byte_view(buf)
    if pos < 0 or pos > len(data):
        raise DecodeError(f"position {pos} outside a buffer of {len(data)} bytes", pos)
    out: list[int] = []
    for _ in range(count):
        v, pos = decode_varlong(data, pos)
        out.append(v)
    return out, pos
