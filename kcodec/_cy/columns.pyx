"""Compiled twin of kcodec._py.columns (see its docstring for the wire layout and the rules).

v2 batches are decoded by one C loop per batch straight into growable C buffers, which
become numpy arrays without a copy at the end (no Python object per record). Growth is
amortized doubling, and each batch reserves up front what its header and its size justify:
offsets for its record count (checked against its bytes first), and key, value and header
data for its records section (for an uncompressed blob, keys and values reserve the rest of
the blob up to 64 MiB, once; from 1 MB the per-record columns are sized once for the
records the batch headers declare); header offsets grow as met. Buffers from 64 KiB on come
from src_c/kcbuf.c, which keeps released blocks with their pages for the next call, each for
the same column.
The buffer is acquired once per call; every read of untrusted bytes is bounded (fast paths
for the usual one- and two-byte varints, the exact reads of _reader.pxd otherwise), with the
record reader's checks in its order so both twins raise what iter_batches raises.
layout="spark" changes only what is written: timestamps times 1000 (microseconds) and
int32 timestamp types, straight from the loop (see kcodec._columnar for the layout).
Legacy message sets (magic 0 and 1) are rare and small: their records come from the record
reader (iter_batches from that entry) and are appended through the same buffers.
"""

from cpython.buffer cimport PyBUF_READ, PyBuffer_FillInfo
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

from kcodec._cy.compression cimport decompress_codec
from kcodec._cy.crc cimport crc32c_of
from kcodec._cy._reader cimport (
    Buf, Reader, be_u16, be_u32, be_u64, get_buf, need, raise_corrupt, read_varint,
    read_varlong,
)

import sys

from kcodec import _columnar
from kcodec._columnar import BinaryColumn, HeadersColumn, RecordColumns, check_layout
from kcodec._cy.batch import iter_batches
from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec.errors import ChecksumError

__all__ = ["decode_columns"]


# ---------------------------------------------------------------------------------------------
# Growable C buffers and the columns they make up


# Offsets switch from int32 to int64 past this value (a test may lower it: _set_wide_limit).
cdef Py_ssize_t _wide_at = INT32_MAX


def _set_wide_limit(limit):
    """For tests: the largest offset kept in int32 columns (default 2**31 - 1)."""
    global _wide_at
    _wide_at = INT32_MAX if limit is None else min(limit, INT32_MAX)


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define KC_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
    #define KC_PREFETCHW(p) __builtin_prefetch((const void *)(p), 1, 3)
    #elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
    #include <xmmintrin.h>
    #define KC_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
    #define KC_PREFETCHW(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
    #else
    #define KC_PREFETCH(p) ((void)(p))
    #define KC_PREFETCHW(p) ((void)(p))
    #endif
    """
    void KC_PREFETCH(const void* p) noexcept nogil
    void KC_PREFETCHW(const void* p) noexcept nogil


cdef extern from "kcbuf.h":
    size_t KCBUF_MIN
    void* kcbuf_alloc(size_t* size, unsigned tag) nogil
    void* kcbuf_resize(void* p, size_t old, size_t* size) nogil
    void kcbuf_free(void* p, size_t size, unsigned tag) nogil


cdef struct Grow:
    char* p
    Py_ssize_t n        # bytes used
    Py_ssize_t cap      # bytes allocated: from KCBUF_MIN on, kcbuf memory, else malloc's
    unsigned tag        # the column's role (kcbuf gives it back the block it used last)


# Big columns come from src_c/kcbuf.c, whose released blocks keep their pages for the next
# call: at 30-60 MB blobs, page faults on fresh memory took more time than the decode.
cdef inline void _release(char* p, Py_ssize_t cap, unsigned tag) noexcept:
    if <size_t>cap >= KCBUF_MIN:
        kcbuf_free(p, <size_t>cap, tag)
    else:
        free(p)


cdef int _grow(Grow* g, Py_ssize_t want) except -1:
    cdef Py_ssize_t cap = g.cap * 2
    cdef size_t size
    cdef char* p
    if cap < want:
        cap = want
    if cap < 64:
        cap = 64
    if <size_t>cap >= KCBUF_MIN:
        size = <size_t>cap
        if <size_t>g.cap >= KCBUF_MIN:
            p = <char*>kcbuf_resize(g.p, <size_t>g.cap, &size)
        else:
            p = <char*>kcbuf_alloc(&size, g.tag)
            if p != NULL:
                if g.n:
                    memcpy(p, g.p, <size_t>g.n)
                free(g.p)
        cap = <Py_ssize_t>size
    else:
        p = <char*>realloc(g.p, <size_t>cap)
    if p == NULL:
        raise MemoryError()
    g.p = p
    g.cap = cap
    return 0


cdef inline int reserve(Grow* g, Py_ssize_t extra) except -1:
    # Also when nothing is allocated yet: a zero-length memcpy to NULL is undefined
    # behaviour (UBSan reports it, and compilers may drop later NULL checks after it).
    if g.p == NULL or extra > g.cap - g.n:
        _grow(g, g.n + extra)
    return 0


cdef struct BinCol:
    Grow offs           # int32 or int64 offsets, count + 1 of them
    Grow data
    Grow bits           # validity bitmap, made at the first null; bits.n == bits.cap, all
                        # allocated bytes zeroed (a bit is set for each non-null value)
    Py_ssize_t count
    Py_ssize_t nulls
    Py_ssize_t lim      # largest data size kept with int32 offsets; -1 once wide
    bint wide


cdef int bin_start(BinCol* c, bint wide) except -1:
    c.wide = wide
    c.lim = -1 if wide else _wide_at
    reserve(&c.offs, 8)
    if wide:
        (<int64_t*>c.offs.p)[0] = 0
        c.offs.n = 8
    else:
        (<int32_t*>c.offs.p)[0] = 0
        c.offs.n = 4
    return 0


cdef inline int bin_reserve(BinCol* c, Py_ssize_t k) except -1:
    """Room for k more offsets (data and bits grow on demand)."""
    c.offs.n = (c.count + 1) * (8 if c.wide else 4)     # (not kept up to date by bin_put)
    return reserve(&c.offs, k * (8 if c.wide else 4))


cdef int bits_room(BinCol* c) except -1:
    """Make sure the bitmap has a (zeroed) byte for bit c.count."""
    cdef Py_ssize_t old = c.bits.cap
    if (c.count >> 3) < old:
        return 0
    _grow(&c.bits, (c.count >> 3) + 1)
    memset(c.bits.p + old, 0, <size_t>(c.bits.cap - old))
    c.bits.n = c.bits.cap
    return 0


cdef int bin_widen(BinCol* c) except -1:
    """Switch to int64 offsets (the data passed 2 GiB): Arrow large_binary / large_string."""
    cdef Py_ssize_t i, n = c.count + 1, cap = (c.offs.cap // 4) * 8
    cdef Grow g
    g.p = NULL
    g.n = 0
    g.cap = 0
    g.tag = c.offs.tag
    _grow(&g, cap)
    for i in range(n):
        (<int64_t*>g.p)[i] = (<int32_t*>c.offs.p)[i]
    g.n = n * 8
    _release(c.offs.p, c.offs.cap, c.offs.tag)
    c.offs = g
    c.wide = True
    c.lim = -1
    return 0


cdef int bin_push(BinCol* c, const uint8_t* src, Py_ssize_t length) except -1:
    """Append one value (the offsets were reserved by bin_reserve): the general path."""
    if c.data.p == NULL or length > c.data.cap - c.data.n:
        _grow(&c.data, c.data.n + length)
    memcpy(c.data.p + c.data.n, src, <size_t>length)
    c.data.n += length
    if c.nulls:
        bits_room(c)
        c.bits.p[c.count >> 3] |= <char>(1 << (c.count & 7))
    c.count += 1
    if not c.wide and c.data.n > _wide_at:
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


cdef inline bint bin_put(BinCol* c, const uint8_t* src, Py_ssize_t length,
                         Py_ssize_t readable) noexcept:
    """bin_push when no allocation is needed and the offsets stay int32; else False.

    ``readable`` bytes may be read at src: short values (most keys and headers) are copied
    as one fixed 16-byte move when both sides have the room, instead of a memcpy call.
    """
    cdef Py_ssize_t n = c.data.n + length
    cdef Py_ssize_t room = c.data.cap - c.data.n
    if length > room or n > c.lim:
        return False
    if c.nulls:
        if (c.count >> 3) >= c.bits.cap:
            return False
        c.bits.p[c.count >> 3] |= <char>(1 << (c.count & 7))
    if length <= 16 and readable >= 16 and room >= 16:
        memcpy(c.data.p + c.data.n, src, 16)
    else:
        memcpy(c.data.p + c.data.n, src, <size_t>length)
    c.data.n = n
    c.count += 1
    (<int32_t*>c.offs.p)[c.count] = <int32_t>n
    return True


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


cdef struct Cols:
    Grow offset         # int64
    Grow timestamp      # int64
    Grow tstype         # int8 (int32 in the Spark layout)
    Grow control        # bool (uint8), only with include_control
    BinCol key
    BinCol value
    Grow hoffs          # headers list offsets (int32, or int64 when hwide)
    bint hwide
    BinCol hkey
    BinCol hval
    Py_ssize_t n        # records
    bint with_control
    bint spark          # Spark's layout: timestamps in microseconds, int32 timestamp types


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
    if c.with_control:
        c.control.p[c.control.n] = <char>control
        c.control.n += 1
    if c.hwide:
        (<int64_t*>(c.hoffs.p + c.hoffs.n))[0] = c.hkey.count
        c.hoffs.n += 8
    else:
        (<int32_t*>(c.hoffs.p + c.hoffs.n))[0] = <int32_t>c.hkey.count
        c.hoffs.n += 4
    c.n += 1


cdef int cols_headers_widen(Cols* c) except -1:
    cdef Py_ssize_t i, n = c.n + 1, cap = (c.hoffs.cap // 4) * 8
    cdef Grow g
    g.p = NULL
    g.n = 0
    g.cap = 0
    g.tag = c.hoffs.tag
    _grow(&g, cap)
    for i in range(n):
        (<int64_t*>g.p)[i] = (<int32_t*>c.hoffs.p)[i]
    g.n = n * 8
    _release(c.hoffs.p, c.hoffs.cap, c.hoffs.tag)
    c.hoffs = g
    c.hwide = True
    return 0


cdef inline int cols_headers_reserve(Cols* c, Py_ssize_t k) except -1:
    """Room for k more headers (the caller checked k against the bytes left)."""
    if not c.hwide and c.hkey.count + k > _wide_at:
        cols_headers_widen(c)
    bin_reserve(&c.hkey, k)
    bin_reserve(&c.hval, k)
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


cdef class _Builder:
    """Holds the growing columns of one decode_columns call (freed if the call fails)."""
    cdef Cols c

    def __cinit__(self, bint include_control, bint large, bint spark):
        memset(&self.c, 0, sizeof(Cols))
        _tag_all(&self.c)
        self.c.with_control = include_control
        self.c.spark = spark
        self.c.hwide = False
        bin_start(&self.c.key, large)
        bin_start(&self.c.value, large)
        bin_start(&self.c.hkey, large)
        bin_start(&self.c.hval, large)
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
        """One record given as Python objects (the legacy path)."""
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


# ---------------------------------------------------------------------------------------------
# Decoding


cdef Py_ssize_t _BLOB_RESERVE = 64 * 1024 * 1024
cdef Py_ssize_t _PRESIZE_AT = 1024 * 1024     # blobs from this size are pre-scanned
cdef object _MAXSIZE = sys.maxsize   # check_max_size() leaves ints in [0, sys.maxsize) as they are
cdef object _np = None              # numpy, imported on the first call
cdef object _ndarray = None
cdef object _I64, _I32, _I8, _U8, _BOOL     # numpy dtypes


cdef int _imports() except -1:
    # A late import: numpy is optional for kcodec.
    global _np, _ndarray, _I64, _I32, _I8, _U8, _BOOL
    np = _columnar.numpy()
    _ndarray = np.ndarray
    _I64, _I32, _I8, _U8, _BOOL = (np.dtype(t) for t in ("i8", "i4", "i1", "u1", "?"))  # native order
    _np = np
    return 0


cdef inline int64_t _wrap_add(int64_t a, int64_t b) noexcept:
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef bint _utf8_ok(const uint8_t* s, Py_ssize_t n) noexcept:
    """Whether s[0:n] is valid UTF-8 by Python's strict rules (no surrogates, <= U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef uint8_t ch, c1
    cdef uint32_t w
    # ASCII fast path, four bytes at a time (header keys are short and mostly ASCII)
    while i + 4 <= n:
        memcpy(&w, s + i, 4)
        if w & 0x80808080u:
            break
        i += 4
    while i < n:
        ch = s[i]
        if ch < 0x80:
            i += 1
            continue
        if ch < 0xC2:
            return False
        if ch < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif ch < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if ch == 0xE0:
                if c1 < 0xA0 or c1 > 0xBF:
                    return False
            elif ch == 0xED:
                if c1 < 0x80 or c1 > 0x9F:
                    return False
            elif (c1 & 0xC0) != 0x80:
                return False
            if (s[i + 2] & 0xC0) != 0x80:
                return False
            i += 3
        elif ch < 0xF5:
            if i + 3 >= n:
                return False
            c1 = s[i + 1]
            if ch == 0xF0:
                if c1 < 0x90 or c1 > 0xBF:
                    return False
            elif ch == 0xF4:
                if c1 < 0x80 or c1 > 0x8F:
                    return False
            elif (c1 & 0xC0) != 0x80:
                return False
            if (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return False
            i += 4
        else:
            return False
    return True


cdef inline bint zz32p(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, int32_t* out) noexcept:
    """A one- or two-byte zigzag varint at d[pos[0]] (almost every varint of a record)."""
    cdef Py_ssize_t p = pos[0]
    cdef uint32_t u
    if end - p < 2:
        return False
    if d[p] < 0x80:
        u = d[p]
        pos[0] = p + 1
    elif d[p + 1] < 0x80:
        u = (d[p] & 0x7F) | (<uint32_t>d[p + 1] << 7)
        pos[0] = p + 2
    else:
        return False
    out[0] = <int32_t>((u >> 1) ^ (-(<int32_t>(u & 1))))
    return True


cdef inline bint zz64p(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, int64_t* out) noexcept:
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t u
    if end - p < 2:
        return False
    if d[p] < 0x80:
        u = d[p]
        pos[0] = p + 1
    elif d[p + 1] < 0x80:
        u = (d[p] & 0x7F) | (<uint64_t>d[p + 1] << 7)
        pos[0] = p + 2
    else:
        return False
    out[0] = <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
    return True


cdef Py_ssize_t varint_at(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                          int32_t* out, str kind) except -1:
    """The exact (raising) varint read at pos; returns the position after it."""
    cdef Reader r
    r.data = d
    r.pos = pos
    r.end = end
    r.base = base
    read_varint(&r, out, kind)
    return r.pos


cdef Py_ssize_t varlong_at(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                           int64_t* out, str kind) except -1:
    cdef Reader r
    r.data = d
    r.pos = pos
    r.end = end
    r.base = base
    read_varlong(&r, out, kind)
    return r.pos


cdef int need_at(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                 Py_ssize_t n, str what) except -1:
    """Raise the reader's error for n bytes wanted at pos (the caller saw they are not there)."""
    cdef Reader r
    r.data = d
    r.pos = pos
    r.end = end
    r.base = base
    return need(&r, n, what)


cdef int _records(Cols* c, Reader* r, int32_t count, int64_t base_offset, int64_t first_ts,
                  int64_t max_ts, int16_t attributes, const uint8_t* pf,
                  Py_ssize_t pf_n) except -1:
    """Decode ``count`` v2 records filling r[pos:end] into the columns.

    Reads and checks exactly what kcodec._py.batch's exact path does, in the same order.
    The position lives in a local (a register) and the fixed-width columns are written
    through local pointers; the exact, raising reads are out-of-line calls.

    pf[:pf_n] (the next batch of the blob) is prefetched, a few cache lines per record, so
    that its CRC pass and decode read it from cache rather than from memory; and the value
    column 1 KiB ahead of its cursor, for writing. In a blob bigger than the caches the
    decode waited for memory: 17.6-18.2 M records/s at 64 MB against 27-28 M at one batch,
    21.5-23 M with these (bench/columns_scaling.py).
    """
    cdef const uint8_t* d = r.data
    cdef Py_ssize_t pos = r.pos, end = r.end, base = r.base
    cdef Py_ssize_t body, rec_end, i, j, rstart, kstart
    cdef int32_t length, n, od, hc, klen, vlen
    cdef int64_t tsd, ts
    cdef int8_t tstype = (attributes >> 3) & 1
    cdef bint control = (attributes & 0x20) != 0
    cdef int64_t* out_offset
    cdef int64_t* out_ts
    cdef char* out_tstype
    cdef bint spark = c.spark
    # Write cursors of the key and value columns, in locals (registers) for the loop: the
    # fast path applies while a column has int32 offsets that cannot overflow in this batch
    # and no null so far; anything else syncs the column, takes the general path, reloads.
    cdef char* kd
    cdef char* vd
    cdef int32_t* koffs
    cdef int32_t* voffs
    cdef Py_ssize_t kn, vn, kcount, vcount
    cdef bint kfast, vfast
    cdef char* hkd
    cdef char* hvd
    cdef int32_t* hkoffs
    cdef int32_t* hvoffs
    cdef Py_ssize_t hkn, hvn, hkcount, hvcount
    cdef bint hfast
    if count > (end - pos) // 7:
        raise_corrupt(f"record count {count} impossible in {end - pos} bytes", pos + base)
    cols_reserve(c, count)
    # Keys and values of the batch fit in its records section: no reallocation inside
    # (for an uncompressed blob the first batch already reserved the rest of the blob).
    reserve(&c.key.data, end - pos + 16)
    reserve(&c.value.data, end - pos + 16)
    kfast = not c.key.wide and c.key.data.n + (end - pos) <= c.key.lim
    vfast = not c.value.wide and c.value.data.n + (end - pos) <= c.value.lim
    # Header keys and values: the same, their data reserved per batch as well.
    reserve(&c.hkey.data, end - pos + 16)
    reserve(&c.hval.data, end - pos + 16)
    hfast = (not c.hkey.wide and not c.hval.wide and c.hkey.data.n + (end - pos) <= c.hkey.lim
             and c.hval.data.n + (end - pos) <= c.hval.lim)
    hkd, hkn, hkcount = c.hkey.data.p, c.hkey.data.n, c.hkey.count
    hvd, hvn, hvcount = c.hval.data.p, c.hval.data.n, c.hval.count
    kd, kn, kcount, koffs = c.key.data.p, c.key.data.n, c.key.count, <int32_t*>c.key.offs.p
    vd, vn, vcount, voffs = c.value.data.p, c.value.data.n, c.value.count, <int32_t*>c.value.offs.p
    out_offset = <int64_t*>(c.offset.p + c.offset.n)
    out_ts = <int64_t*>(c.timestamp.p + c.timestamp.n)
    out_tstype = c.tstype.p + c.tstype.n
    # spread over the records: whole cache lines, at most 64 of them per record
    cdef Py_ssize_t pf_step = 0, pf_k
    if pf_n > 0 and count > 0:
        pf_step = min(((pf_n // count) | 63) + 1, 4096)
    for i in range(count):
        if pf_n > 0:
            pf_k = 0
            while pf_k < pf_step and pf_k < pf_n:
                KC_PREFETCH(pf + pf_k)
                pf_k += 64
            pf += pf_step
            pf_n -= pf_step
        KC_PREFETCHW(vd + vn + 1024)     # (never faults, even past the reservation)
        rstart = pos
        if not zz32p(d, &pos, end, &length):
            pos = varint_at(d, pos, end, base, &length, "record length")
        if length < 0 or length > end - pos:
            need_at(d, pos, end, base, length, "record")
        body = pos
        rec_end = pos + length
        if pos < rec_end:
            pos += 1        # the record's attributes: unused
        else:
            need_at(d, pos, rec_end, base, 1, "record attributes")
        if not zz64p(d, &pos, rec_end, &tsd):
            pos = varlong_at(d, pos, rec_end, base, &tsd, "timestamp delta")
        if not zz32p(d, &pos, rec_end, &od):
            pos = varint_at(d, pos, rec_end, base, &od, "offset delta")
        if not zz32p(d, &pos, rec_end, &klen):
            pos = varint_at(d, pos, rec_end, base, &klen, "key length")
        kstart = pos
        if klen == -1:
            c.key.data.n, c.key.count = kn, kcount
            bin_null(&c.key)
            kcount, koffs = c.key.count, <int32_t*>c.key.offs.p
        else:
            if klen < 0 or klen > rec_end - pos:
                need_at(d, pos, rec_end, base, klen, "record key")
            if kfast and c.key.nulls == 0:
                if klen <= 16 and end - pos >= 16:
                    memcpy(kd + kn, d + pos, 16)     # room: reserved region + 16
                else:
                    memcpy(kd + kn, d + pos, <size_t>klen)
                kn += klen
                kcount += 1
                koffs[kcount] = <int32_t>kn
            else:
                c.key.data.n, c.key.count = kn, kcount
                bin_push(&c.key, d + pos, klen)
                kd, kn, kcount = c.key.data.p, c.key.data.n, c.key.count
                koffs = <int32_t*>c.key.offs.p
            pos += klen
        if not zz32p(d, &pos, rec_end, &vlen):
            pos = varint_at(d, pos, rec_end, base, &vlen, "value length")
        if vlen == -1:
            c.value.data.n, c.value.count = vn, vcount
            bin_null(&c.value)
            vcount, voffs = c.value.count, <int32_t*>c.value.offs.p
        else:
            if vlen < 0 or vlen > rec_end - pos:
                need_at(d, pos, rec_end, base, vlen, "record value")
            if vfast and c.value.nulls == 0:
                if vlen <= 16 and end - pos >= 16:
                    memcpy(vd + vn, d + pos, 16)
                else:
                    memcpy(vd + vn, d + pos, <size_t>vlen)
                vn += vlen
                vcount += 1
                voffs[vcount] = <int32_t>vn
            else:
                c.value.data.n, c.value.count = vn, vcount
                bin_push(&c.value, d + pos, vlen)
                vd, vn, vcount = c.value.data.p, c.value.data.n, c.value.count
                voffs = <int32_t*>c.value.offs.p
            pos += vlen
        if not zz32p(d, &pos, rec_end, &hc):
            pos = varint_at(d, pos, rec_end, base, &hc, "header count")
        if hc != 0:
            if hc < 0:
                raise_corrupt(f"negative header count {hc}", pos + base)
            if hc > (rec_end - pos) // 2:
                raise_corrupt(f"header count {hc} impossible in {rec_end - pos} bytes",
                              pos + base)
            cols_headers_reserve(c, hc)
            hkoffs, hvoffs = <int32_t*>c.hkey.offs.p, <int32_t*>c.hval.offs.p
            for j in range(hc):
                if not zz32p(d, &pos, rec_end, &n):
                    pos = varint_at(d, pos, rec_end, base, &n, "header key length")
                if n < 0 or n > rec_end - pos:
                    need_at(d, pos, rec_end, base, n, "header key")
                if not _utf8_ok(d + pos, n):
                    raise_corrupt("header key is not valid UTF-8", pos + base)
                if hfast:
                    if n <= 16 and end - pos >= 16:
                        memcpy(hkd + hkn, d + pos, 16)
                    else:
                        memcpy(hkd + hkn, d + pos, <size_t>n)
                    hkn += n
                    hkcount += 1
                    hkoffs[hkcount] = <int32_t>hkn
                else:
                    c.hkey.data.n, c.hkey.count = hkn, hkcount
                    bin_push(&c.hkey, d + pos, n)
                    hkd, hkn, hkcount = c.hkey.data.p, c.hkey.data.n, c.hkey.count
                    hkoffs = <int32_t*>c.hkey.offs.p
                pos += n
                if not zz32p(d, &pos, rec_end, &n):
                    pos = varint_at(d, pos, rec_end, base, &n, "header value length")
                if n == -1:
                    c.hval.data.n, c.hval.count = hvn, hvcount
                    bin_null(&c.hval)
                    hvcount, hvoffs = c.hval.count, <int32_t*>c.hval.offs.p
                else:
                    if n < 0 or n > rec_end - pos:
                        need_at(d, pos, rec_end, base, n, "header value")
                    if hfast and c.hval.nulls == 0:
                        if n <= 16 and end - pos >= 16:
                            memcpy(hvd + hvn, d + pos, 16)
                        else:
                            memcpy(hvd + hvn, d + pos, <size_t>n)
                        hvn += n
                        hvcount += 1
                        hvoffs[hvcount] = <int32_t>hvn
                    else:
                        c.hval.data.n, c.hval.count = hvn, hvcount
                        bin_push(&c.hval, d + pos, n)
                        hvd, hvn, hvcount = c.hval.data.p, c.hval.data.n, c.hval.count
                        hvoffs = <int32_t*>c.hval.offs.p
                    pos += n
            c.hkey.data.n, c.hkey.count = hkn, hkcount
            c.hval.data.n, c.hval.count = hvn, hvcount
        if pos != rec_end:
            raise_corrupt(f"record length {length} but its fields took {pos - body} bytes",
                          body + base)
        if control:
            _check_control(d, base, rstart, klen, kstart, vlen)
        out_offset[i] = _wrap_add(base_offset, od)
        ts = max_ts if tstype else _wrap_add(first_ts, tsd)
        if spark:
            out_ts[i] = <int64_t>(<uint64_t>ts * 1000)
            (<int32_t*>out_tstype)[i] = tstype
        else:
            out_ts[i] = ts
            (<int8_t*>out_tstype)[i] = tstype
        if c.with_control:
            c.control.p[c.control.n] = <char>control
            c.control.n += 1
        if c.hwide:
            (<int64_t*>(c.hoffs.p + c.hoffs.n))[0] = c.hkey.count
            c.hoffs.n += 8
        else:
            (<int32_t*>(c.hoffs.p + c.hoffs.n))[0] = <int32_t>c.hkey.count
            c.hoffs.n += 4
        c.n += 1
        c.offset.n += 8
        c.timestamp.n += 8
        c.tstype.n += 4 if spark else 1
    c.key.data.n, c.key.count = kn, kcount
    c.value.data.n, c.value.count = vn, vcount
    r.pos = pos
    if pos != end:
        raise_corrupt(f"{end - pos} bytes left after the last of {count} records", pos + base)
    return 0


cdef int _check_control(const uint8_t* d, Py_ssize_t base, Py_ssize_t rstart, int32_t klen,
                        Py_ssize_t kstart, int32_t vlen) except -1:
    """The checks the record reader makes on a control record's key and marker value."""
    cdef int16_t ctype
    if klen < 4:
        raise_corrupt("control record key shorter than 4 bytes", rstart + base)
    ctype = <int16_t>be_u16(d + kstart + 2)
    if (ctype == 0 or ctype == 1) and vlen < 6:
        raise_corrupt("transaction marker value shorter than 6 bytes", rstart + base)
    return 0


cdef object _v2_batch(Cols* c, const uint8_t* p, Py_ssize_t pos, Py_ssize_t size,
                      object view, bint validate_crc, bint include_control, object max_size,
                      Py_ssize_t blob_size):
    """Decode the v2 batch at p[pos:pos+size] of a blob of blob_size bytes; returns its next
    offset."""
    cdef int64_t base_offset = <int64_t>be_u64(p + pos)
    cdef uint32_t crc = be_u32(p + pos + 17)
    cdef int16_t attributes = <int16_t>be_u16(p + pos + 21)
    cdef int32_t last_delta = <int32_t>be_u32(p + pos + 23)
    cdef int64_t first_ts = <int64_t>be_u64(p + pos + 27)
    cdef int64_t max_ts = <int64_t>be_u64(p + pos + 35)
    cdef int32_t count = <int32_t>be_u32(p + pos + 57)
    cdef int codec = attributes & 0x07
    cdef uint32_t actual
    cdef Reader r
    cdef Buf db
    # what _records prefetches: the bytes after this batch, as many as it has (the next
    # batch, most likely of a similar size), none past the blob
    cdef Py_ssize_t pf_at = pos + size
    cdef Py_ssize_t pf_n = min(size, blob_size - pf_at)
    if validate_crc:
        actual = crc32c_of(p + pos + 21, size - 21)
        if actual != crc:
            raise ChecksumError(crc, actual, pos, "record batch CRC-32C")
    if count < 0:
        raise_corrupt(f"negative record count {count}", pos + 57)
    next_offset = _wrap_add(_wrap_add(base_offset, last_delta), 1)
    if (attributes & 0x20) and not include_control:
        return next_offset
    if codec == 0:
        r.data = p
        r.pos = pos + 61
        r.end = pos + size
        r.base = 0
        _records(c, &r, count, base_offset, first_ts, max_ts, attributes, p + pf_at, pf_n)
    else:
        db = get_buf(decompress_codec(codec, view[pos + 61:pos + size], max_size, 2))
        r.data = db.ptr
        r.pos = 0
        r.end = db.size
        r.base = 0
        _records(c, &r, count, base_offset, first_ts, max_ts, attributes, p + pf_at, pf_n)
    return next_offset


cdef object _legacy(_Builder builder, object buf, Py_ssize_t pos, bint validate_crc,
                    bint include_control, object max_size):
    """The legacy entry at pos, through the record reader; returns (end, next offset)."""
    it = iter_batches(buf, validate_crc=validate_crc, max_decompressed_size=max_size, start=pos)
    entry = next(it)
    for rec in entry:
        builder.append(rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value,
                       rec.headers, False)
    return it.consumed, entry.next_offset


cdef Py_ssize_t _declared_records(const uint8_t* p, Py_ssize_t size) noexcept:
    """The records the v2 batch headers of a blob declare, up to the first entry that is not
    a complete v2 batch; a guess for sizing only (bounded by what the bytes can hold, 7 per
    uncompressed record, and by 64 MiB of int64s), never trusted for anything else."""
    cdef Py_ssize_t pos = 0, total = 0
    cdef int32_t length, count
    while size - pos >= 61:
        length = <int32_t>be_u32(p + pos + 8)
        if length < 49 or length > size - pos - 12 or p[pos + 16] != 2:
            break
        count = <int32_t>be_u32(p + pos + 57)
        if count > 0:
            total += count
        pos += length + 12
    if total > size // 7:
        total = size // 7
    if total > _BLOB_RESERVE // 8:
        total = _BLOB_RESERVE // 8
    return total


def decode_columns(buf, *, validate_crc=True, include_control=False, large=False,
                   max_decompressed_size=DEFAULT_MAX_SIZE, layout="kcodec"):
    """Decode every record of a records blob into columns; see kcodec.records.columns."""
    cdef bint spark = check_layout(layout, large)
    if _np is None:
        _imports()
    if not (type(max_decompressed_size) is int and 0 <= max_decompressed_size < _MAXSIZE):
        max_decompressed_size = check_max_size(max_decompressed_size)
    cdef Buf b = get_buf(buf)
    cdef const uint8_t* p = b.ptr
    cdef Py_ssize_t size = b.size, pos = 0, rem, batches = 0
    cdef int32_t length
    cdef uint8_t magic
    cdef _Builder builder = _Builder(include_control, large, spark)
    cdef Py_ssize_t declared
    view = None
    next_offset = None
    if size >= _PRESIZE_AT:
        # The per-record columns sized once for the whole blob instead of doubling batch
        # by batch (each doubling a copy, or fresh pages).
        declared = _declared_records(p, size)
        if declared:
            cols_reserve(&builder.c, declared)
    while True:
        rem = size - pos
        if rem < 12:
            break
        length = <int32_t>be_u32(p + pos + 8)
        if length < 14:
            raise_corrupt(f"batch length {length} below the minimum of 14", pos + 8)
        if length > rem - 12:
            break
        magic = p[pos + 16]
        if magic == 2:
            if length < 49:
                raise_corrupt(f"batch length {length} below the minimum of 49 for magic 2",
                              pos + 8)
            if view is None:
                view = PyMemoryView_FromMemory(<char*>p, size, PyBUF_READ)
                # Keys and values of the uncompressed batches from here on fit in the rest
                # of the blob: one allocation each (virtual memory; trimmed at the end), up
                # to 64 MiB (a multi-GiB mmap'd segment must not ask for its size twice
                # over at once; past this, each batch reserves its own size).
                reserve(&builder.c.key.data, min(size - pos, _BLOB_RESERVE))
                reserve(&builder.c.value.data, min(size - pos, _BLOB_RESERVE))
            next_offset = _v2_batch(&builder.c, p, pos, length + 12, view, validate_crc,
                                    include_control, max_decompressed_size, size)
            pos += length + 12
        elif magic <= 1:
            end, next_offset = _legacy(builder, buf, pos, validate_crc, include_control,
                                       max_decompressed_size)
            pos = end
        else:
            raise_corrupt(f"unknown magic byte {magic}", pos + 16)
        batches += 1
    return builder.finish(pos, batches, next_offset)
