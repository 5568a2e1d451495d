"""Growable C buffers and the columns they make up (see _colbuf.pxd), for kcodec._cy.columns.

Growth is amortized doubling. Buffers from 64 KiB on come from src_c/kcbuf.c, which keeps
released blocks with their pages for the next call, each for the same column (at 30-60 MB
blobs, page faults on fresh memory took more time than the decode). At the end each buffer
becomes a numpy array without a copy (a _Block lends it through the buffer protocol).
"""

from cpython.buffer cimport PyBuffer_FillInfo
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

from kcodec import _columnar
from kcodec._columnar import BinaryColumn, HeadersColumn, RecordColumns

cdef object _np = None              # numpy, imported on the first call
cdef object _ndarray = None
cdef object _I64, _I32, _I8, _U8, _BOOL     # numpy dtypes


cdef int numpy_ready() except -1:
    # A late import: numpy is optional for kcodec.
    global _np, _ndarray, _I64, _I32, _I8, _U8, _BOOL
    if _np is not None:
        return 0
    np = _columnar.numpy()
    _ndarray = np.ndarray
    _I64, _I32, _I8, _U8, _BOOL = (np.dtype(t) for t in ("i8", "i4", "i1", "u1", "?"))  # native order
    _np = np
    return 0


cdef extern from "kcbuf.h":
    size_t KCBUF_MIN
    void* kcbuf_grow(void* p, size_t used, size_t* cap, size_t want, unsigned tag) nogil
    void kcbuf_release(void* p, size_t cap, unsigned tag) nogil


# Big columns come from src_c/kcbuf.c, whose released blocks keep their pages for the next
# call: at 30-60 MB blobs, page faults on fresh memory took more time than the decode.
cdef inline void _release(char* p, Py_ssize_t cap, unsigned tag) noexcept:
    kcbuf_release(p, <size_t>cap, tag)


cdef int grow(Grow* g, Py_ssize_t want) except -1:
    cdef Py_ssize_t cap = g.cap * 2
    cdef size_t size = <size_t>g.cap
    cdef char* p
    if cap < want:
        cap = want
    if cap < 64:
        cap = 64
    p = <char*>kcbuf_grow(g.p, <size_t>g.n, &size, <size_t>cap, g.tag)
    if p == NULL:
        raise MemoryError()
    g.p = p
    g.cap = <Py_ssize_t>size
    return 0


cdef int bin_start(BinCol* c, bint wide, Py_ssize_t wide_at) except -1:
    c.wide = wide
    c.lim = -1 if wide else wide_at
    reserve(&c.offs, 8)
    if wide:
        (<int64_t*>c.offs.p)[0] = 0
        c.offs.n = 8
    else:
        (<int32_t*>c.offs.p)[0] = 0
        c.offs.n = 4
    return 0


cdef int bits_room(BinCol* c) except -1:
    """Make sure the bitmap has a (zeroed) byte for bit c.count."""
    cdef Py_ssize_t old = c.bits.cap
    if (c.count >> 3) < old:
        return 0
    grow(&c.bits, (c.count >> 3) + 1)
    memset(c.bits.p + old, 0, <size_t>(c.bits.cap - old))
    c.bits.n = c.bits.cap
    return 0


cdef int _widen(Grow* offs, Py_ssize_t n) except -1:
    """The n int32 offsets of ``offs`` as int64 ones, in a buffer twice the size."""
    cdef Py_ssize_t i
    cdef Grow g
    g.p = NULL
    g.n = 0
    g.cap = 0
    g.tag = offs.tag
    grow(&g, (offs.cap // 4) * 8)
    for i in range(n):
        (<int64_t*>g.p)[i] = (<int32_t*>offs.p)[i]
    g.n = n * 8
    _release(offs.p, offs.cap, offs.tag)
    offs[0] = g
    return 0


cdef int bin_widen(BinCol* c) except -1:
    """Switch to int64 offsets (the data passed 2 GiB): Arrow large_binary / large_string."""
    _widen(&c.offs, c.count + 1)
    c.wide = True
    c.lim = -1
    return 0


cdef int bin_push(BinCol* c, const uint8_t* src, Py_ssize_t length) except -1:
    """Append one value (the offsets were reserved by bin_reserve): the general path."""
    if c.data.p == NULL or length > c.data.cap - c.data.n:
        grow(&c.data, c.data.n + length)
    memcpy(c.data.p + c.data.n, src, <size_t>length)
    c.data.n += length
    if c.nulls:
        bits_room(c)
        c.bits.p[c.count >> 3] |= <char>(1 << (c.count & 7))
    c.count += 1
    if not c.wide and c.data.n > c.lim:
        c.count -= 1
        bin_widen(c)
        c.count += 1
    if c.wide:
        (<int64_t*>c.offs.p)[c.count] = c.data.n
        c.offs.n += 8
    else:
        (<int32_t*>c.offs.p)[c.count] = <int32_t>c.data.n
        c.offs.n += 4
    return 0


cdef int bin_null(BinCol* c) except -1:
    """Append a null (the offsets were reserved by bin_reserve)."""
    cdef Py_ssize_t full
    bits_room(c)
    if c.nulls == 0:
        # The first null: every value so far was valid.
        full = c.count >> 3
        memset(c.bits.p, 0xFF, <size_t>full)
        c.bits.p[full] = <char>((1 << (c.count & 7)) - 1)
    c.nulls += 1
    c.count += 1
    if c.wide:
        (<int64_t*>c.offs.p)[c.count] = c.data.n
        c.offs.n += 8
    else:
        (<int32_t*>c.offs.p)[c.count] = <int32_t>c.data.n
        c.offs.n += 4
    return 0


cdef int cols_reserve(Cols* c, Py_ssize_t k) except -1:
    """Room for k more records in every per-record column."""
    reserve(&c.offset, k * 8)
    reserve(&c.timestamp, k * 8)
    reserve(&c.tstype, k * (4 if c.spark else 1))
    if c.with_control:
        reserve(&c.control, k)
    reserve(&c.hoffs, k * (8 if c.hwide else 4))
    bin_reserve(&c.key, k)
    bin_reserve(&c.value, k)
    return 0


cdef inline void cols_push(Cols* c, int64_t offset, int64_t timestamp, int8_t tstype,
                           bint control) noexcept:
    """The fixed-width fields of one record, after its key, value and headers."""
    (<int64_t*>(c.offset.p + c.offset.n))[0] = offset
    c.offset.n += 8
    if c.spark:
        (<int64_t*>(c.timestamp.p + c.timestamp.n))[0] = <int64_t>(<uint64_t>timestamp * 1000)
        (<int32_t*>(c.tstype.p + c.tstype.n))[0] = tstype
        c.tstype.n += 4
    else:
        (<int64_t*>(c.timestamp.p + c.timestamp.n))[0] = timestamp
        c.tstype.p[c.tstype.n] = <char>tstype
        c.tstype.n += 1
    c.timestamp.n += 8
    cols_close_record(c, control)


cdef int cols_headers_widen(Cols* c) except -1:
    """Switch the headers' list offsets to int64 (more than 2**31 - 1 headers)."""
    _widen(&c.hoffs, c.n + 1)
    c.hwide = True
    return 0


cdef class _Block:
    """Owns one malloc'd buffer and lends it through the buffer protocol.

    Lent writable: numpy asks for a writable buffer first, and refusing costs an exception
    (with its traceback) per array, a twentieth of a 1,000-record decode. The arrays are the
    caller's, like any numpy result (the pure twin's are writable too).
    """
    cdef char* p
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef unsigned tag

    def __dealloc__(self):
        _release(self.p, self.cap, self.tag)
        self.p = NULL

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.p, self.n, 0, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef object _take(Grow* g, object dtype):
    """Hand g's memory to a numpy array of dtype (no copy); g is left empty."""
    cdef _Block b = _Block.__new__(_Block)
    cdef char* p = g.p
    cdef Py_ssize_t n = g.n
    cdef Py_ssize_t cap = g.cap
    # A kcbuf block keeps its unused tail (pages never written cost nothing): it goes back
    # to the cache whole, ready for the same reservation in the next call.
    if (p == NULL or cap - n > 4096) and <size_t>cap < KCBUF_MIN:
        # Give back the slack (a few KiB are not worth a realloc); also makes a column that
        # never allocated own a real (1-byte) allocation.
        p = <char*>realloc(p, <size_t>(n if n > 0 else 1))
        if p == NULL:
            raise MemoryError()
        cap = n if n > 0 else 1
    g.p = NULL
    g.n = 0
    g.cap = 0
    b.p = p
    b.n = n
    b.cap = cap
    b.tag = g.tag
    return _ndarray((n // dtype.itemsize,), dtype, b)


cdef object _take_bin(BinCol* c, bint utf8):
    cdef object offsets
    c.offs.n = (c.count + 1) * (8 if c.wide else 4)
    offsets = _take(&c.offs, _I64 if c.wide else _I32)
    cdef object data = _take(&c.data, _U8)
    cdef object bits = None
    if c.nulls:
        c.bits.n = (c.count + 7) >> 3
        bits = _take(&c.bits, _U8)
    return BinaryColumn(offsets, data, bits, c.nulls, utf8)


cdef void _free_bin(BinCol* c) noexcept:
    _release(c.offs.p, c.offs.cap, c.offs.tag)
    _release(c.data.p, c.data.cap, c.data.tag)
    _release(c.bits.p, c.bits.cap, c.bits.tag)


cdef void _tag_all(Cols* c) noexcept:
    """Name every column's role for kcbuf (1-17; 0 is no tag)."""
    c.offset.tag, c.timestamp.tag, c.tstype.tag, c.control.tag, c.hoffs.tag = 1, 2, 3, 4, 5
    c.key.offs.tag, c.key.data.tag, c.key.bits.tag = 6, 7, 8
    c.value.offs.tag, c.value.data.tag, c.value.bits.tag = 9, 10, 11
    c.hkey.offs.tag, c.hkey.data.tag, c.hkey.bits.tag = 12, 13, 14
    c.hval.offs.tag, c.hval.data.tag, c.hval.bits.tag = 15, 16, 17


cdef class Builder:
    """Holds the growing columns of one decode_columns call (freed if the call fails);
    ``wide_at``: the largest offset kept in int32 columns."""

    def __cinit__(self, bint include_control, bint large, bint spark, Py_ssize_t wide_at):
        memset(&self.c, 0, sizeof(Cols))
        _tag_all(&self.c)
        self.c.with_control = include_control
        self.c.spark = spark
        self.c.hwide = False
        self.c.wide_at = wide_at
        bin_start(&self.c.key, large, wide_at)
        bin_start(&self.c.value, large, wide_at)
        bin_start(&self.c.hkey, large, wide_at)
        bin_start(&self.c.hval, large, wide_at)
        reserve(&self.c.hoffs, 4)
        (<int32_t*>self.c.hoffs.p)[0] = 0
        self.c.hoffs.n = 4

    def __dealloc__(self):
        _release(self.c.offset.p, self.c.offset.cap, self.c.offset.tag)
        _release(self.c.timestamp.p, self.c.timestamp.cap, self.c.timestamp.tag)
        _release(self.c.tstype.p, self.c.tstype.cap, self.c.tstype.tag)
        _release(self.c.control.p, self.c.control.cap, self.c.control.tag)
        _release(self.c.hoffs.p, self.c.hoffs.cap, self.c.hoffs.tag)
        _free_bin(&self.c.key)
        _free_bin(&self.c.value)
        _free_bin(&self.c.hkey)
        _free_bin(&self.c.hval)

    cdef int append(self, object offset, object timestamp, object tstype, object key,
                    object value, object headers, bint control) except -1:
        cdef Cols* c = &self.c
        cdef Py_ssize_t k
        cdef const uint8_t[::1] mv
        cols_reserve(c, 1)
        _push_obj(&c.key, key)
        _push_obj(&c.value, value)
        k = len(headers)
        cols_headers_reserve(c, k)
        for hk, hv in headers:
            _push_obj(&c.hkey, (<str>hk).encode("utf-8"))
            _push_obj(&c.hval, hv)
        cols_push(c, offset, timestamp, tstype, control)
        return 0

    cdef object finish(self, Py_ssize_t consumed, Py_ssize_t batch_count, object next_offset):
        cdef Cols* c = &self.c
        control = _take(&c.control, _BOOL) if c.with_control else None
        headers = HeadersColumn(
            _take(&c.hoffs, _I64 if c.hwide else _I32),
            _take_bin(&c.hkey, True),
            _take_bin(&c.hval, False),
        )
        return RecordColumns(
            _take(&c.offset, _I64),
            _take(&c.timestamp, _I64),
            _take(&c.tstype, _I32 if c.spark else _I8),
            _take_bin(&c.key, False),
            _take_bin(&c.value, False),
            headers,
            control,
            consumed,
            batch_count,
            next_offset,
            "spark" if c.spark else "kcodec",
        )


cdef int _push_obj(BinCol* c, object v) except -1:
    cdef const uint8_t[::1] mv
    if v is None:
        return bin_null(c)
    mv = v
    if mv.shape[0] == 0:
        return bin_push(c, <const uint8_t*>"", 0)
    return bin_push(c, &mv[0], mv.shape[0])
