"""Compiled twin of kcodec._py.crc (see its docstring for the definitions).

CRC-32C runs our own C (src_c/crc32c.c): SSE4.2 or the ARMv8 CRC extension when the CPU
has them, slicing-by-8 tables otherwise (or with KCODEC_CRC32C_FORCE_TABLE=1, read once
at import). CRC-32 is zlib's, as in the pure twin.
"""

import os
import zlib

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint8_t, uint32_t

from kcodec._cy._reader cimport Buf, get_buf

from operator import index as _index

cdef extern from "crc32c.h":
    int kcodec_crc32c_init(int force_table)
    uint32_t kcodec_crc32c_update(uint32_t crc, const void* data, size_t n) nogil
    uint32_t kcodec_crc32c_update_table(uint32_t crc, const void* data, size_t n) nogil
    const char* kcodec_crc32c_backend_name()

__all__ = ["crc32c", "crc32", "CRC32C_BACKEND"]

# Below this many bytes the GIL round trip costs more than it frees (measured in bench/).
cdef Py_ssize_t _NOGIL_MIN = 64 * 1024


def _force_table():
    flag = os.environ.get("KCODEC_CRC32C_FORCE_TABLE", "").strip().lower()
    return flag not in ("", "0", "false", "no", "off")


kcodec_crc32c_init(1 if _force_table() else 0)
CRC32C_BACKEND = kcodec_crc32c_backend_name().decode("ascii")


cdef uint32_t crc32c_update(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil:
    return kcodec_crc32c_update(crc, p, n)


cdef inline uint32_t _crc_view(uint32_t v, const void* p, Py_ssize_t n, bint table) noexcept:
    if n >= _NOGIL_MIN:
        with nogil:
            if table:
                v = kcodec_crc32c_update_table(v, p, <size_t>n)
            else:
                v = kcodec_crc32c_update(v, p, <size_t>n)
        return v
    if table:
        return kcodec_crc32c_update_table(v, p, <size_t>n)
    return kcodec_crc32c_update(v, p, <size_t>n)


cdef object _crc32c(object data, object value, bint table):
    cdef uint32_t v = <uint32_t>(_index(value) & 0xFFFFFFFF)
    cdef Py_buffer view
    cdef Buf b
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except (BufferError, ValueError, TypeError):
        b = get_buf(data)  # copies non-contiguous buffers; raises the pure twin's TypeError
        return _crc_view(v, b.ptr, b.size, table)
    try:
        return _crc_view(v, view.buf, view.len, table)
    finally:
        PyBuffer_Release(&view)


def _crc32c_table(data, value=0):
    """CRC-32C through the portable tables whatever the CPU (for tests)."""
    return _crc32c(data, value, True)


def crc32c(data, value=0):
    """CRC-32C of ``data``, continuing from the CRC ``value`` of the bytes before it."""
    return _crc32c(data, value, False)


def crc32(data, value=0):
    """CRC-32 (IEEE 802.3, as zlib.crc32) of ``data``, continuing from ``value``."""
    v = _index(value) & 0xFFFFFFFF
    try:
        return zlib.crc32(data, v)
    except (BufferError, ValueError):
        # Non-contiguous: zlib wants one block, so take a C-order copy as the pure twin does.
        return zlib.crc32(memoryview(data).tobytes(), v)
