"""lz4 frame decompression for the compiled twin: the frame Kafka writes (independent
blocks, no block or content checksums, no dictionary) decoded block by block with liblz4's
``LZ4_decompress_safe`` straight into one output bytes object: no decompression context,
no frame parsing in Python, no output buffer larger than the blocks can fill.

Which liblz4: the one the ``lz4`` package carries (its block module exports the function;
``ctypes`` gives its address), the library the pure twin's ``lz4.frame`` runs.

This is a fast path only. Anything else (several frames, skippable frames, a header
checksum that is not the correct one, block or content checksums, linked blocks, a
dictionary, reserved bits, a block that fails or overflows, a size other than the declared
one, output past the budget) returns None, and the caller decodes with
kcodec._codecs.lz4_codec, which gives the result or the error the pure twin gives.
"""

from cpython.bytes cimport PyBytes_AS_STRING, _PyBytes_Resize
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_XDECREF
from libc.stdint cimport uint8_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy

from kcodec._cy._reader cimport Buf, get_buf

ctypedef int (*decompress_safe_t)(const char*, char*, int, int) noexcept nogil

cdef extern from "Python.h":
    PyObject* _bytes_new "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n) except NULL

cdef enum:
    MAGIC = 0x184D2204

cdef int _state = 0              # 0: not looked up, 1: ready, -1: not available
cdef decompress_safe_t _dec = NULL

_library = None


cdef int _load() except -1:
    global _state, _dec, _library
    _state = -1
    try:
        import ctypes

        import lz4.block._block as block
        fn = ctypes.CDLL(block.__file__).LZ4_decompress_safe
        address = ctypes.cast(fn, ctypes.c_void_p).value
    except Exception:  # noqa: BLE001 - any failure: the Python path is used
        return 0
    if not address:
        return 0
    _dec = <decompress_safe_t><uintptr_t>address
    _library = ("lz4.block", block.__file__)
    _state = 1
    return 0


cdef inline uint32_t _rotl(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef inline uint32_t _le32(const uint8_t* p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef uint32_t xxh32_short(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """XXH32 with seed 0 of fewer than 16 bytes (a frame descriptor is at most 14)."""
    cdef uint32_t acc = 0x165667B1 + <uint32_t>n
    cdef Py_ssize_t pos = 0
    while pos + 4 <= n:
        acc = _rotl(acc + _le32(p + pos) * 0xC2B2AE3DU, 17) * 0x27D4EB2FU
        pos += 4
    while pos < n:
        acc = _rotl(acc + p[pos] * 0x165667B1U, 11) * 0x9E3779B1U
        pos += 1
    acc ^= acc >> 15
    acc *= 0x85EBCA77U
    acc ^= acc >> 13
    acc *= 0xC2B2AE3DU
    acc ^= acc >> 16
    return acc


def header_checksum(descriptor):
    """The frame header checksum byte of ``descriptor`` (FLG BD [size] [dict id]), for tests."""
    cdef Buf b = get_buf(descriptor)
    if b.size >= 16:
        raise ValueError("a descriptor is at most 14 bytes")
    return (xxh32_short(b.ptr, b.size) >> 8) & 0xFF


cdef object _frame(const uint8_t* p, Py_ssize_t n, Py_ssize_t max_size, int magic):
    cdef Py_ssize_t pos, hc_pos, block_max, length, bound, produced, cap, room
    cdef uint32_t word
    cdef uint8_t flg, bd
    cdef long long size = -1
    cdef int got
    cdef PyObject* raw
    cdef char* o
    if n < 7 or _le32(p) != MAGIC:
        return None
    flg = p[4]
    bd = p[5]
    # version 01, independent blocks, no block checksums, no content checksum, no dictionary,
    # no reserved bits; block size id 4-7, no reserved bits
    if flg != 0x60 and flg != 0x68:
        return None
    if bd & 0x8F or (bd >> 4) < 4:
        return None
    block_max = (64 << 10) << (2 * ((bd >> 4) - 4))   # 64 KiB, 256 KiB, 1 MiB, 4 MiB
    hc_pos = 6
    if flg & 0x08:
        hc_pos = 14
        if n < 15:
            return None
        size = <long long>(_le32(p + 6) | (<uint64_t>_le32(p + 10) << 32))
        if size < 0 or size > max_size:
            return None
    if magic != 0 and p[hc_pos] != ((xxh32_short(p + 4, hc_pos - 4) >> 8) & 0xFF):
        return None
    # the blocks: their framing first (the bound of what they can make), then the output
    pos = hc_pos + 1
    bound = 0
    while True:
        if n - pos < 4:
            return None
        word = _le32(p + pos)
        pos += 4
        if word == 0:
            break
        length = word & 0x7FFFFFFF
        if length > block_max or length > n - pos:
            return None
        bound += length if word >> 31 else block_max
        pos += length
    if pos != n:
        return None                      # more after the frame: the general path
    if size >= 0:
        if size > bound:
            return None
        cap = <Py_ssize_t>size
    else:
        cap = bound if bound <= max_size else max_size
    raw = _bytes_new(NULL, cap)
    o = PyBytes_AS_STRING(<object>raw)
    pos = hc_pos + 1
    produced = 0
    with nogil:
        while True:
            word = _le32(p + pos)
            pos += 4
            if word == 0:
                break
            length = word & 0x7FFFFFFF
            room = cap - produced
            if word >> 31:
                if length > room:
                    produced = -1
                    break
                memcpy(o + produced, p + pos, length)
                produced += length
            else:
                got = _dec(<const char*>(p + pos), o + produced, <int>length,
                           <int>(block_max if block_max < room else room))
                if got < 0:
                    produced = -1
                    break
                produced += got
            pos += length
    if produced < 0 or (size >= 0 and produced != size):
        Py_XDECREF(raw)
        return None
    if produced != cap:
        _PyBytes_Resize(&raw, produced)
    out = <object>raw
    Py_DECREF(out)  # the cast took a reference of its own
    return out


def decompress(data, Py_ssize_t max_size, int magic):
    """The output of ``data`` when it is one plain Kafka-style lz4 frame that decodes within
    ``max_size`` bytes; None otherwise (decode it with kcodec._codecs.lz4_codec then)."""
    return lz4_frame(data, max_size, magic)


cdef object lz4_frame(object data, Py_ssize_t max_size, int magic):
    cdef Buf b
    if _state != 1:
        if _state == 0:
            _load()
        if _state != 1:
            return None
    b = get_buf(data)
    return _frame(b.ptr, b.size, max_size, magic)


def library():
    """(module, file) whose liblz4 this module calls, or None."""
    if _state == 0:
        _load()
    return _library
