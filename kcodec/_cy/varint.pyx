"""Compiled twin of kcodec._py.varint (see its docstring for the wire layout)."""

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kcodec._cy._reader cimport (
    Buf, Reader, get_buf, put_uvar, raise_decode, raise_encode, read_uvar, uvar_size,
    zigzag32, zigzag64,
)

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

cdef object _U32_MAX = 0xFFFFFFFF
cdef object _I32_MIN = -(1 << 31)
cdef object _I32_MAX = (1 << 31) - 1
cdef object _I64_MIN = -(1 << 63)
cdef object _I64_MAX = (1 << 63) - 1


cdef inline int _check(object value, str kind, object lo, object hi) except -1:
    if not isinstance(value, int):
        raise_encode(f"{kind} value must be an int, not {type(value).__name__}")
    if value < lo or value > hi:
        raise_encode(f"value {value} out of range for {kind} ({lo}..{hi})")
    return 0


cdef inline uint64_t _zz64(object value) except? 0:
    cdef int64_t v
    if type(value) is not int:
        _check(value, "varlong", _I64_MIN, _I64_MAX)
    try:
        v = value
    except OverflowError:
        _check(value, "varlong", _I64_MIN, _I64_MAX)
        raise
    return zigzag64(v)


cdef inline bytes _pack(uint64_t u):
    cdef uint8_t tmp[10]
    cdef Py_ssize_t n = put_uvar(tmp, u)
    return PyBytes_FromStringAndSize(<char*>tmp, n)


cdef inline tuple _decode(object buf, Py_ssize_t pos, int max_bytes, int bits, str kind, int zz):
    cdef Buf b = get_buf(buf)
    cdef Reader r
    cdef uint64_t u
    if pos < 0 or pos > b.size:
        raise_decode(f"position {pos} outside a buffer of {b.size} bytes", pos)
    r.data = b.ptr
    r.pos = pos
    r.end = b.size
    r.base = 0
    read_uvar(&r, &u, max_bytes, bits, kind)
    if not zz:
        return (u, r.pos)
    if bits == 32:
        return (<int32_t>((<uint32_t>u >> 1) ^ (-(<int32_t>(u & 1)))), r.pos)
    return (<int64_t>((u >> 1) ^ (-(<int64_t>(u & 1)))), r.pos)


def encode_uvarint(value):
    """Unsigned varint of a value in [0, 2**32)."""
    _check(value, "unsigned varint", 0, _U32_MAX)
    return _pack(<uint64_t>value)


def decode_uvarint(buf, Py_ssize_t pos=0):
    """Decode an unsigned varint (at most 5 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode(buf, pos, 5, 32, "unsigned varint", 0)


def uvarint_size(value):
    """Encoded size in bytes of an unsigned varint."""
    _check(value, "unsigned varint", 0, _U32_MAX)
    return uvar_size(<uint64_t>value)


def encode_varint(value):
    """Zigzag varint of a value in [-2**31, 2**31)."""
    _check(value, "varint", _I32_MIN, _I32_MAX)
    return _pack(zigzag32(<int32_t>value))


def decode_varint(buf, Py_ssize_t pos=0):
    """Decode a zigzag varint (at most 5 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode(buf, pos, 5, 32, "varint", 1)


def varint_size(value):
    """Encoded size in bytes of a zigzag varint."""
    _check(value, "varint", _I32_MIN, _I32_MAX)
    return uvar_size(zigzag32(<int32_t>value))


def encode_varlong(value):
    """Zigzag varlong of a value in [-2**63, 2**63)."""
    return _pack(_zz64(value))


def decode_varlong(buf, Py_ssize_t pos=0):
    """Decode a zigzag varlong (at most 10 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode(buf, pos, 10, 64, "varlong", 1)


def varlong_size(value):
    """Encoded size in bytes of a zigzag varlong."""
    return uvar_size(_zz64(value))


def encode_varlongs(values):
    """Concatenated zigzag varlongs of every value, in order."""
    cdef list items = list(values)
    cdef Py_ssize_t n = len(items)
    cdef bytearray out = bytearray(n * 10)
    cdef uint8_t* p = <uint8_t*>(<char*>out)
    cdef Py_ssize_t w = 0
    for value in items:
        w += put_uvar(p + w, _zz64(value))
    del out[w:]
    return bytes(out)


def decode_varlongs(buf, Py_ssize_t count, Py_ssize_t pos=0):
    """Decode ``count`` consecutive zigzag varlongs at ``pos``: ``(values, next_pos)``."""
    cdef Buf b
    cdef Reader r
    cdef uint64_t u
    cdef list out = []
    if count < 0:
        raise_decode(f"negative count {count}", pos)
    b = get_buf(buf)
    if pos < 0 or pos > b.size:
        raise_decode(f"position {pos} outside a buffer of {b.size} bytes", pos)
    r.data = b.ptr
    r.pos = pos
    r.end = b.size
    r.base = 0
    for _ in range(count):
        read_uvar(&r, &u, 10, 64, "varlong")
        out.append(<int64_t>((u >> 1) ^ (-(<int64_t>(u & 1)))))
    return out, r.pos
