# Growable C buffers and the columns they make up, for columnar decode (kcodec._cy.columns).
#
# Every column is a Grow (pointer, used, allocated); a binary column (BinCol) is Arrow's
# binary layout: int32 offsets (int64 past Cols.wide_at: large_binary), data, and a validity
# bitmap made at the first null. Builder holds the Cols of one decode_columns call and hands
# them to numpy at the end without a copy. The checks that run once per record or value are
# inline here (compiled into the decoder); growing, widening and the general append are
# calls into kcodec._cy._colbuf.
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef struct Grow:
    char* p
    Py_ssize_t n        # bytes used
    Py_ssize_t cap      # bytes allocated: from KCBUF_MIN on, kcbuf memory, else malloc's
    unsigned tag        # the column's role (kcbuf gives it back the block it used last)


cdef struct BinCol:
    Grow offs           # int32 or int64 offsets, count + 1 of them
    Grow data
    Grow bits           # validity bitmap, made at the first null; bits.n == bits.cap, all
                        # allocated bytes zeroed (a bit is set for each non-null value)
    Py_ssize_t count
    Py_ssize_t nulls
    Py_ssize_t lim      # largest data size kept with int32 offsets (Cols.wide_at); -1 once wide
    bint wide


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
    Py_ssize_t wide_at  # offsets switch from int32 to int64 past this (2**31 - 1; tests lower it)


cdef int grow(Grow* g, Py_ssize_t want) except -1
cdef int bin_push(BinCol* c, const uint8_t* src, Py_ssize_t length) except -1
cdef int bin_null(BinCol* c) except -1
cdef int cols_reserve(Cols* c, Py_ssize_t k) except -1
cdef int cols_headers_widen(Cols* c) except -1
# numpy imported (the arrays' dtypes looked up once): ImportError naming the extra if missing
cdef int numpy_ready() except -1


cdef inline int reserve(Grow* g, Py_ssize_t extra) except -1:
    # Also when nothing is allocated yet: a zero-length memcpy to NULL is undefined
    # behaviour (UBSan reports it, and compilers may drop later NULL checks after it).
    if g.p == NULL or extra > g.cap - g.n:
        grow(g, g.n + extra)
    return 0


cdef inline int bin_reserve(BinCol* c, Py_ssize_t k) except -1:
    """Room for k more offsets (data and bits grow on demand)."""
    c.offs.n = (c.count + 1) * (8 if c.wide else 4)     # (not kept up to date by a Cursor)
    return reserve(&c.offs, k * (8 if c.wide else 4))


cdef inline int cols_headers_reserve(Cols* c, Py_ssize_t k) except -1:
    """Room for k more headers (the caller checked k against the bytes left)."""
    if not c.hwide and c.hkey.count + k > c.wide_at:
        cols_headers_widen(c)
    bin_reserve(&c.hkey, k)
    bin_reserve(&c.hval, k)
    return 0


cdef inline void cols_close_record(Cols* c, bint control) noexcept:
    """After a record's other columns: its control flag (when kept) and the end of its
    headers list; the record counted."""
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


cdef class Builder:
    """Holds the growing columns of one decode_columns call (freed if the call fails)."""
    cdef Cols c
    # one record given as Python objects (the legacy path)
    cdef int append(self, object offset, object timestamp, object tstype, object key,
                    object value, object headers, bint control) except -1
    # the columns as a RecordColumns; the Builder is left empty
    cdef object finish(self, Py_ssize_t consumed, Py_ssize_t batch_count, object next_offset)
