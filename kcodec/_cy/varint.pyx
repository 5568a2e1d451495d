"""Compiled twin of kcodec._py.varint (see its docstring for the wire layout)."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromLongLong
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kcodec._cy._reader cimport (
    Buf, Reader, get_buf, put_uvar, raise_decode, raise_encode, raise_truncated, read_uvar,
    uvar_size, zigzag32, zigzag64,
)

from operator import index as _index

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int* overflow) except? -1

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


cdef object _check(object value, str kind, object lo, object hi):
    """The value as a Python int in [lo, hi], or EncodeError (as the pure twin's _check_int)."""
    if not isinstance(value, int):
        try:
            value = _index(value)
        except TypeError:
            raise_encode(f"{kind} value must be an int, not {type(value).__name__}")
    if value < lo or value > hi:
        raise_encode(f"value {value} out of range for {kind} ({lo}..{hi})")
    return value


cdef inline int _i64(object value, int64_t* out) except -1:
    """A varlong value: exact ints in range take the C fast path, the rest go via _check."""
    cdef int overflow = 0
    cdef long long v
    if type(value) is int:
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow:
            out[0] = v
            return 0
    out[0] = <int64_t>_check(value, "varlong", _I64_MIN, _I64_MAX)
    return 0


cdef inline int _i32(object value, int32_t* out) except -1:
    cdef int overflow = 0
    cdef long long v
    if type(value) is int:
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow and -2147483648 <= v <= 2147483647:
            out[0] = <int32_t>v
            return 0
    out[0] = <int32_t>_check(value, "varint", _I32_MIN, _I32_MAX)
    return 0


cdef inline int _u32(object value, uint32_t* out) except -1:
    cdef int overflow = 0
    cdef long long v
    if type(value) is int:
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow and 0 <= v <= 0xFFFFFFFF:
            out[0] = <uint32_t>v
            return 0
    out[0] = <uint32_t>_check(value, "unsigned varint", 0, _U32_MAX)
    return 0


cdef inline bytes _pack(uint64_t u):
    cdef uint8_t tmp[10]
    cdef Py_ssize_t n = put_uvar(tmp, u)
    return PyBytes_FromStringAndSize(<char*>tmp, n)


cdef inline int _read(Reader* r, uint64_t* u, Py_ssize_t pos, Py_ssize_t size,
                      int max_bytes, int bits, str kind) except -1:
    if pos < 0 or pos > size:
        raise_decode(f"position {pos} outside a buffer of {size} bytes", pos)
    r.pos = pos
    r.end = size
    r.base = 0
    return read_uvar(r, u, max_bytes, bits, kind)


cdef object _decode(object buf, Py_ssize_t pos, int max_bytes, int bits, str kind, int zz):
    cdef Py_buffer view
    cdef Buf b
    cdef Reader r
    cdef uint64_t u
    # One buffer grab per call: a stack Py_buffer for contiguous inputs, get_buf (which
    # copies non-contiguous ones and words the TypeError) otherwise.
    try:
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    except (BufferError, ValueError, TypeError):
        b = get_buf(buf)
        r.data = b.ptr
        _read(&r, &u, pos, b.size, max_bytes, bits, kind)
    else:
        try:
            r.data = <const uint8_t*>view.buf
            _read(&r, &u, pos, view.len, max_bytes, bits, kind)
        finally:
            PyBuffer_Release(&view)
    if not zz:
        return (u, r.pos)
    if bits == 32:
        return (<int32_t>((<uint32_t>u >> 1) ^ (-(<int32_t>(u & 1)))), r.pos)
    return (<int64_t>((u >> 1) ^ (-(<int64_t>(u & 1)))), r.pos)


def encode_uvarint(value):
    """Unsigned varint of a value in [0, 2**32)."""
    cdef uint32_t v
    _u32(value, &v)
    return _pack(v)


def decode_uvarint(buf, Py_ssize_t pos=0):
    """Decode an unsigned varint (at most 5 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode(buf, pos, 5, 32, "unsigned varint", 0)


def uvarint_size(value):
    """Encoded size in bytes of an unsigned varint."""
    cdef uint32_t v
    _u32(value, &v)
    return uvar_size(v)


def encode_varint(value):
    """Zigzag varint of a value in [-2**31, 2**31)."""
    cdef int32_t v
    _i32(value, &v)
    return _pack(zigzag32(v))


def decode_varint(buf, Py_ssize_t pos=0):
    """Decode a zigzag varint (at most 5 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode(buf, pos, 5, 32, "varint", 1)


def varint_size(value):
    """Encoded size in bytes of a zigzag varint."""
    cdef int32_t v
    _i32(value, &v)
    return uvar_size(zigzag32(v))


def encode_varlong(value):
    """Zigzag varlong of a value in [-2**63, 2**63)."""
    cdef int64_t v
    _i64(value, &v)
    return _pack(zigzag64(v))


def decode_varlong(buf, Py_ssize_t pos=0):
    """Decode a zigzag varlong (at most 10 bytes) at ``pos``: ``(value, next_pos)``."""
    return _decode(buf, pos, 10, 64, "varlong", 1)


def varlong_size(value):
    """Encoded size in bytes of a zigzag varlong."""
    cdef int64_t v
    _i64(value, &v)
    return uvar_size(zigzag64(v))


def encode_varlongs(values):
    """Concatenated zigzag varlongs of every value, in order."""
    cdef object items = values if type(values) is list or type(values) is tuple else list(values)
    cdef Py_ssize_t n = len(items)
    cdef Py_ssize_t i
    cdef Py_ssize_t w = 0
    cdef int64_t v
    cdef uint8_t* out
    if n == 0:
        return b""
    out = <uint8_t*>PyMem_Malloc(<size_t>n * 10)
    if out == NULL:
        raise MemoryError()
    try:
        if type(items) is list:
            for i in range(n):
                _i64((<list>items)[i], &v)
                w += put_uvar(out + w, zigzag64(v))
        else:
            for i in range(n):
                _i64((<tuple>items)[i], &v)
                w += put_uvar(out + w, zigzag64(v))
        return PyBytes_FromStringAndSize(<char*>out, w)
    finally:
        PyMem_Free(out)


def decode_varlongs(buf, Py_ssize_t count, Py_ssize_t pos=0):
    """Decode ``count`` consecutive zigzag varlongs at ``pos``: ``(values, next_pos)``."""
    cdef Buf b
    cdef Reader r
    cdef uint64_t u
    cdef Py_ssize_t i
    cdef list out
    cdef object item
    if count < 0:
        raise_decode(f"negative count {count}", pos)
    b = get_buf(buf)
    if pos < 0 or pos > b.size:
        raise_decode(f"position {pos} outside a buffer of {b.size} bytes", pos)
    r.data = b.ptr
    r.pos = pos
    r.end = b.size
    r.base = 0
    if count > b.size - pos:
        # Each varlong takes at least one byte, so this input cannot hold them all: find
        # the same error the pure twin meets, without allocating for ``count`` values.
        while True:
            read_uvar(&r, &u, 10, 64, "varlong")
    out = PyList_New(count)
    for i in range(count):
        read_uvar(&r, &u, 10, 64, "varlong")
        item = PyLong_FromLongLong(<int64_t>((u >> 1) ^ (-(<int64_t>(u & 1)))))
        Py_INCREF(item)
        PyList_SET_ITEM(out, i, item)
    return out, r.pos
