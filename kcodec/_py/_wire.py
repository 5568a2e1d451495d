"""Exact, bounds-checked reads for the pure-Python record twins.

These mirror ``kcodec/_cy/_reader.pxd`` check for check, so both twins raise the same
exception with the same fields at the same place. Positions are indexes into ``data``;
``base`` is added to positions in error messages. The hot loops in ``batch``/``legacy``
take an optimistic fast path and fall back to these on anything unusual.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import CorruptDataError, EncodeError, EncodeTypeError, TruncatedError

__all__ = ["need", "uvar", "varint", "varlong", "wrap64", "as_bytes_view", "uvar_bytes",
           "check_int", "bytes_like"]

_I64 = 1 << 64
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def need(pos: int, end: int, n: int, what: str, base: int) -> None:
    """``n`` bytes must remain at ``pos`` (and ``n`` must not be negative)."""
    if n < 0:
        raise CorruptDataError(f"negative length {n} for {what}", pos + base)
    if n > end - pos:
        raise TruncatedError(n, pos + base, end - pos, what)


def uvar(data: Any, pos: int, end: int, max_bytes: int, bits: int, kind: str,
         base: int) -> tuple[int, int]:
    """Unsigned base-128 varint of at most ``max_bytes`` bytes and ``bits`` bits."""
    start = pos
    result = 0
    shift = 0
    n = 0
    while True:
        if pos >= end:
            raise TruncatedError(n + 1, start + base, end - start, kind)
        b = data[pos]
        pos += 1
        n += 1
        if n == max_bytes:
            if b & 0x80:
                raise CorruptDataError(f"{kind} too long: more than {max_bytes} bytes",
                                       start + base)
            if b >> (bits - shift):
                raise CorruptDataError(f"{kind} overflows {bits} bits", start + base)
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def varint(data: Any, pos: int, end: int, kind: str, base: int) -> tuple[int, int]:
    """Zigzag 32-bit varint."""
    u, pos = uvar(data, pos, end, 5, 32, kind, base)
    return (u >> 1) ^ -(u & 1), pos


def varlong(data: Any, pos: int, end: int, kind: str, base: int) -> tuple[int, int]:
    """Zigzag 64-bit varlong."""
    u, pos = uvar(data, pos, end, 10, 64, kind, base)
    return (u >> 1) ^ -(u & 1), pos


def wrap64(v: int) -> int:
    """Two's-complement wrap to int64, as the compiled twin's C arithmetic does."""
    if _I64_MIN <= v <= _I64_MAX:
        return v
    v &= _I64 - 1
    return v - _I64 if v > _I64_MAX else v


def as_bytes_view(buf: Any) -> Any:
    """``buf`` itself if it is bytes, else a flat unsigned-byte memoryview of it."""
    if type(buf) is bytes:
        return buf
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(buf).__name__!r}") from None
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B") if mv.c_contiguous else memoryview(mv.tobytes())
    return mv


_SMALL = [bytes((i,)) for i in range(128)]


def uvar_bytes(u: int) -> bytes:
    """Base-128 varint encoding of a non-negative int."""
    if u < 0x80:
        return _SMALL[u]
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def check_int(value: Any, lo: int, hi: int, what: str) -> int:
    """An int in [lo, hi] or EncodeError (the same text as the compiled twin)."""
    if type(value) is not int and not isinstance(value, int):
        raise EncodeTypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < lo or value > hi:
        raise EncodeError(f"{what} {value} out of range ({lo}..{hi})")
    return int(value)


def bytes_like(value: Any, what: str) -> Any:
    """``value`` as something with len() and concatenable into a bytearray, or None."""
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        raise EncodeTypeError(f"{what} must be bytes-like or None, not str")
    try:
        mv = memoryview(value)
    except TypeError:
        raise EncodeTypeError(f"{what} must be bytes-like or None, not {type(value).__name__}") from None
    return mv.tobytes()
