"""Compiled twin of kcodec._py.xerial (see its docstring for the wire layout).

The chunk walk and the preamble checks run in C over one buffer grabbed per call; each block
is handed to cramjam as a slice, and decoded straight into the final ``bytes`` object.
"""

from cpython.buffer cimport PyBUF_WRITE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int32_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from kcodec._cy._reader cimport Buf, be_u32, get_buf, put_u32

from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec.errors import CorruptDataError, DecompressionLimitError, UnsupportedCodecError

__all__ = [
    "XERIAL_MAGIC",
    "XERIAL_HEADER",
    "XERIAL_BLOCK_SIZE",
    "is_xerial",
    "xerial_compress",
    "xerial_decompress",
    "snappy_decompress",
]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
XERIAL_BLOCK_SIZE = 32 * 1024
cdef Py_ssize_t _MAX_BLOCK_SIZE = 1 << 30
cdef const char* _MAGIC = b"\x82SNAPPY\x00"


cdef object _snappy():
    try:
        import cramjam

        return cramjam.snappy
    except (ImportError, AttributeError):  # AttributeError: a None stand-in in sys.modules
        raise UnsupportedCodecError("snappy", "cramjam") from None


cdef memoryview _view(object data):
    """A flat unsigned-byte view of any buffer-protocol object (a copy only if not contiguous)."""
    cdef memoryview mv
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None
    if mv.ndim == 1 and mv.format == "B":
        if mv.c_contiguous:
            return mv
    elif mv.c_contiguous:
        return mv.cast("B")
    return memoryview(mv.tobytes())


cdef inline Py_ssize_t _max_compressed(Py_ssize_t n) noexcept:
    return 32 + n + n // 6


cdef inline bint _has_magic(const uint8_t* p, Py_ssize_t n) noexcept:
    return n >= 8 and memcmp(p, _MAGIC, 8) == 0


def is_xerial(data) -> bool:
    """True when ``data`` starts with the xerial magic (the header ints are not checked)."""
    cdef Buf b = get_buf(_view(data))
    return _has_magic(b.ptr, b.size)


def xerial_compress(data, block_size=XERIAL_BLOCK_SIZE) -> bytes:
    """``data`` in xerial framing: the header, then one chunk per ``block_size`` input bytes."""
    if not isinstance(block_size, int) or not 1 <= block_size <= _MAX_BLOCK_SIZE:
        raise ValueError(f"block_size must be an int in 1..{_MAX_BLOCK_SIZE}, not {block_size!r}")
    snappy = _snappy()
    cdef memoryview src = _view(data)
    cdef Py_ssize_t bs = block_size
    cdef Py_ssize_t n = len(src)
    cdef Py_ssize_t blocks = max(1, (n + bs - 1) // bs)
    cdef Py_ssize_t cap = 16 + blocks * (4 + _max_compressed(bs))
    cdef bytearray out = bytearray(cap)
    cdef uint8_t* p = <uint8_t*>(<char*>out)
    cdef memoryview dst = PyMemoryView_FromMemory(<char*>p, cap, PyBUF_WRITE)
    cdef Py_ssize_t pos = 16
    cdef Py_ssize_t start = 0
    cdef Py_ssize_t written
    memcpy(p, PyBytes_AS_STRING(XERIAL_HEADER), 16)
    try:
        while True:  # at least one block, empty for empty input
            written = snappy.compress_raw_into(src[start : start + bs], dst[pos + 4 :])
            put_u32(p + pos, <uint32_t>written)
            pos += 4 + written
            start += bs
            if start >= n:
                break
    finally:
        dst.release()
    return PyBytes_FromStringAndSize(<char*>p, pos)


cdef int _preamble(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, uint64_t* value,
                   Py_ssize_t* plen) except -1:
    """Uncompressed length (to value) and preamble size (to plen) of the block at p[pos:end]."""
    cdef uint64_t v = 0
    cdef uint8_t byte
    cdef int i
    for i in range(5):
        if pos + i >= end:
            raise CorruptDataError("truncated snappy length preamble", pos)
        byte = p[pos + i]
        v |= (<uint64_t>(byte & 0x7F)) << (7 * i)
        if byte < 0x80:
            if v > 0xFFFFFFFFu:
                raise CorruptDataError("snappy length preamble overflows 32 bits", pos)
            value[0] = v
            plen[0] = i + 1
            return 0
    raise CorruptDataError("snappy length preamble longer than 5 bytes", pos)


cdef Py_ssize_t _check_block(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t budget,
                             object max_size) except -1:
    """The block's uncompressed length, checked against the budget and its own size."""
    cdef Py_ssize_t plen = 0
    cdef uint64_t ulen = 0
    _preamble(p, pos, end, &ulen, &plen)
    if ulen > <uint64_t>budget:
        raise DecompressionLimitError("snappy", max_size, pos)
    # Every snappy element of k bytes yields at most 64 * k / 3 bytes (a 3-byte copy of 64),
    # and at least one byte: an empty block is its preamble alone.
    if 3 * ulen > 64 * <uint64_t>(end - pos - plen) or (ulen == 0 and end - pos != plen):
        raise CorruptDataError(
            f"snappy block claims {ulen} bytes from {end - pos} compressed bytes", pos
        )
    return <Py_ssize_t>ulen


cdef int _decode_into(object snappy, memoryview src, Py_ssize_t pos, Py_ssize_t end,
                      memoryview dst, Py_ssize_t ulen) except -1:
    cdef Py_ssize_t got
    try:
        got = snappy.decompress_raw_into(src[pos:end], dst)
    except Exception as exc:  # cramjam.DecompressionError and friends
        raise CorruptDataError("corrupt snappy block", pos) from exc
    if got != ulen:
        raise CorruptDataError(f"snappy block produced {got} bytes, its preamble says {ulen}", pos)
    return 0


cdef inline int32_t _chunk_length(const uint8_t* p, Py_ssize_t pos, Py_ssize_t n) except? -1:
    cdef int32_t length
    if n - pos < 4:
        raise CorruptDataError(f"truncated xerial chunk length: {n - pos} of 4 bytes", pos)
    length = <int32_t>be_u32(p + pos)
    if length < 0:
        raise CorruptDataError(f"negative xerial chunk length {length}", pos)
    if length > n - pos - 4:
        raise CorruptDataError(
            f"xerial chunk length {length} overruns the stream: {n - pos - 4} bytes remain", pos
        )
    return length


def xerial_decompress(data, max_size=DEFAULT_MAX_SIZE) -> bytes:
    """Decompress a xerial-framed snappy stream of at most ``max_size`` output bytes."""
    cdef Py_ssize_t limit = check_max_size(max_size)
    cdef memoryview src = _view(data)
    cdef Buf b = get_buf(src)
    cdef const uint8_t* p = b.ptr
    cdef Py_ssize_t n = b.size
    cdef Py_ssize_t pos, start, length, ulen
    cdef Py_ssize_t total = 0
    if not _has_magic(p, n):
        raise CorruptDataError("not a xerial snappy stream: bad magic", 0)
    if n < 16:
        raise CorruptDataError(f"truncated xerial header: {n} of 16 bytes", 0)
    # Pass 1: walk the chunks and sum the preambles before allocating anything.
    pos = 16
    while pos < n:
        length = _chunk_length(p, pos, n)
        start = pos + 4
        pos = start + length
        if length:
            total += _check_block(p, start, pos, limit - total, max_size)
    if total == 0:
        return b""
    # Pass 2: decode every block straight into its place in the output.
    snappy = _snappy()
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef memoryview dst = PyMemoryView_FromMemory(PyBytes_AS_STRING(out), total, PyBUF_WRITE)
    cdef Py_ssize_t at = 0
    cdef Py_ssize_t plen = 0
    cdef uint64_t u = 0
    try:
        pos = 16
        while pos < n:
            length = <Py_ssize_t>(<int32_t>be_u32(p + pos))
            start = pos + 4
            pos = start + length
            if length:
                _preamble(p, start, pos, &u, &plen)
                ulen = <Py_ssize_t>u
                if ulen:
                    _decode_into(snappy, src, start, pos, dst[at : at + ulen], ulen)
                    at += ulen
    finally:
        dst.release()
    return out


def snappy_decompress(data, max_size=DEFAULT_MAX_SIZE) -> bytes:
    """Kafka snappy: a xerial stream when it starts with the magic, else one raw snappy block."""
    cdef Py_ssize_t limit = check_max_size(max_size)
    cdef memoryview src = _view(data)
    cdef Buf b = get_buf(src)
    if _has_magic(b.ptr, b.size):
        return xerial_decompress(src, max_size)
    cdef Py_ssize_t ulen = _check_block(b.ptr, 0, b.size, limit, max_size)
    if ulen == 0:
        return b""
    snappy = _snappy()
    cdef bytes out = PyBytes_FromStringAndSize(NULL, ulen)
    cdef memoryview dst = PyMemoryView_FromMemory(PyBytes_AS_STRING(out), ulen, PyBUF_WRITE)
    try:
        _decode_into(snappy, src, 0, b.size, dst, ulen)
    finally:
        dst.release()
    return out
