"""Compiled twin of kcodec._py.columns (see its docstring for the wire layout and the rules).

v2 batches are decoded by one C loop per batch straight into growable C buffers (the
columns of kcodec._cy._colbuf), which become numpy arrays without a copy at the end (no
Python object per record). Each batch reserves up front what its header and its size
justify: offsets for its record count (checked against its bytes first), and key, value and
header data for its records section (for an uncompressed blob, keys and values reserve the
rest of the blob up to 64 MiB, once; from 1 MB the per-record columns are sized once for
the records the batch headers declare); header offsets grow as met.
The buffer is acquired once per call; every read of untrusted bytes is bounded (fast paths
for the usual one- and two-byte varints, the exact reads of _reader.pxd otherwise), with the
record reader's checks in its order so both twins raise what iter_batches raises.
layout="spark" changes only what is written: timestamps times 1000 (microseconds) and
int32 timestamp types, straight from the loop (see kcodec._columnar for the layout).
Legacy message sets (magic 0 and 1) are rare and small: their records come from the record
reader (iter_batches from that entry) and are appended through the same buffers.
"""

from cpython.buffer cimport PyBUF_READ
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

from kcodec._cy._colbuf cimport (
    BinCol, Builder, Cols, bin_null, bin_push, cols_close_record, cols_headers_reserve,
    cols_reserve, numpy_ready, reserve,
)
from kcodec._cy.compression cimport decompress_codec
from kcodec._cy.crc cimport crc32c_of
from kcodec._cy._reader cimport (
    Buf, Reader, be_u16, be_u32, be_u64, fast_varint, fast_varlong, get_buf, need,
    raise_corrupt, read_varint, read_varlong,
)

import sys

from kcodec._columnar import check_layout
from kcodec._cy.batch import iter_batches
from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec.errors import ChecksumError

__all__ = ["decode_columns", "join_values"]


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


cdef Py_ssize_t _BLOB_RESERVE = 64 * 1024 * 1024
cdef Py_ssize_t _PRESIZE_AT = 1024 * 1024     # blobs from this size are pre-scanned
cdef object _MAXSIZE = sys.maxsize   # check_max_size() leaves ints in [0, sys.maxsize) as they are
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


cdef struct Cursor:
    # A binary column's write position, held by the record loop in locals (registers): its
    # data pointer and size, value count and int32 offsets. ``fast``: the batch reserved
    # the column's data, its offsets stay int32 through it and it has no null (a bitmap
    # to keep): values are then appended in place (see _records).
    BinCol* col
    char* data
    Py_ssize_t n
    Py_ssize_t count
    int32_t* offs
    bint fast


cdef inline void cur_load(Cursor* k) noexcept:
    k.data, k.n, k.count, k.offs = k.col.data.p, k.col.data.n, k.col.count, <int32_t*>k.col.offs.p


cdef inline void cur_store(Cursor* k) noexcept:
    k.col.data.n, k.col.count = k.n, k.count


cdef inline int cur_put(Cursor* k, const uint8_t* src, Py_ssize_t n,
                        Py_ssize_t readable) except -1:
    """Append the n bytes at src (``readable`` bytes may be read there): in place while the
    cursor is fast, else through bin_push (the cursor synced around it)."""
    if k.fast:
        if n <= 16 and readable >= 16:
            memcpy(k.data + k.n, src, 16)     # room: the reserved region + 16
        else:
            memcpy(k.data + k.n, src, <size_t>n)
        k.n += n
        k.count += 1
        k.offs[k.count] = <int32_t>k.n
        return 0
    cur_store(k)
    bin_push(k.col, src, n)
    cur_load(k)
    return 0


cdef inline Py_ssize_t cur_field(Cursor* k, const uint8_t* src, int32_t n,
                                 Py_ssize_t readable) except -1:
    """Append the field of n bytes at src, or a null for n = -1 (the caller checked n
    against the record): the bytes it takes."""
    if n == -1:
        cur_store(k)
        bin_null(k.col)
        cur_load(k)
        k.fast = False      # a column with a null keeps its bitmap: bin_push from now on
        return 0
    cur_put(k, src, n, readable)
    return n


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
    # Write cursors of the key, value and header columns, in locals for the loop: the fast
    # path applies while a column has int32 offsets that cannot overflow in this batch and
    # no null so far; anything else syncs the column, takes the general path, reloads.
    cdef Cursor key, value, hkey, hval
    cdef bint hfast
    if count > (end - pos) // 7:
        raise_corrupt(f"record count {count} impossible in {end - pos} bytes", pos + base)
    cols_reserve(c, count)
    # Keys and values of the batch fit in its records section: no reallocation inside
    # (for an uncompressed blob the first batch already reserved the rest of the blob).
    reserve(&c.key.data, end - pos + 16)
    reserve(&c.value.data, end - pos + 16)
    key.col, value.col, hkey.col, hval.col = &c.key, &c.value, &c.hkey, &c.hval
    key.fast = not c.key.wide and c.key.data.n + (end - pos) <= c.key.lim and not c.key.nulls
    value.fast = (not c.value.wide and c.value.data.n + (end - pos) <= c.value.lim
                  and not c.value.nulls)
    # Header keys and values: the same, their data reserved per batch as well.
    reserve(&c.hkey.data, end - pos + 16)
    reserve(&c.hval.data, end - pos + 16)
    hfast = (not c.hkey.wide and not c.hval.wide and c.hkey.data.n + (end - pos) <= c.hkey.lim
             and c.hval.data.n + (end - pos) <= c.hval.lim)
    hkey.fast = hfast
    hval.fast = hfast and not c.hval.nulls
    cur_load(&key)
    cur_load(&value)
    cur_load(&hkey)
    cur_load(&hval)
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
        KC_PREFETCHW(value.data + value.n + 1024)     # (never faults, even past the reservation)
        rstart = pos
        if not fast_varint(d, &pos, end, &length):
            pos = varint_at(d, pos, end, base, &length, "record length")
        if length < 0 or length > end - pos:
            need_at(d, pos, end, base, length, "record")
        body = pos
        rec_end = pos + length
        if pos < rec_end:
            pos += 1        # the record's attributes: unused
        else:
            need_at(d, pos, rec_end, base, 1, "record attributes")
        if not fast_varlong(d, &pos, rec_end, &tsd):
            pos = varlong_at(d, pos, rec_end, base, &tsd, "timestamp delta")
        if not fast_varint(d, &pos, rec_end, &od):
            pos = varint_at(d, pos, rec_end, base, &od, "offset delta")
        if not fast_varint(d, &pos, rec_end, &klen):
            pos = varint_at(d, pos, rec_end, base, &klen, "key length")
        kstart = pos
        if klen < -1 or klen > rec_end - pos:
            need_at(d, pos, rec_end, base, klen, "record key")
        pos += cur_field(&key, d + pos, klen, end - pos)
        if not fast_varint(d, &pos, rec_end, &vlen):
            pos = varint_at(d, pos, rec_end, base, &vlen, "value length")
        if vlen < -1 or vlen > rec_end - pos:
            need_at(d, pos, rec_end, base, vlen, "record value")
        pos += cur_field(&value, d + pos, vlen, end - pos)
        if not fast_varint(d, &pos, rec_end, &hc):
            pos = varint_at(d, pos, rec_end, base, &hc, "header count")
        if hc != 0:
            if hc < 0:
                raise_corrupt(f"negative header count {hc}", pos + base)
            if hc > (rec_end - pos) // 2:
                raise_corrupt(f"header count {hc} impossible in {rec_end - pos} bytes",
                              pos + base)
            cols_headers_reserve(c, hc)
            hkey.offs, hval.offs = <int32_t*>c.hkey.offs.p, <int32_t*>c.hval.offs.p
            for j in range(hc):
                if not fast_varint(d, &pos, rec_end, &n):
                    pos = varint_at(d, pos, rec_end, base, &n, "header key length")
                if n < 0 or n > rec_end - pos:
                    need_at(d, pos, rec_end, base, n, "header key")
                if not _utf8_ok(d + pos, n):
                    raise_corrupt("header key is not valid UTF-8", pos + base)
                cur_put(&hkey, d + pos, n, end - pos)
                pos += n
                if not fast_varint(d, &pos, rec_end, &n):
                    pos = varint_at(d, pos, rec_end, base, &n, "header value length")
                if n < -1 or n > rec_end - pos:
                    need_at(d, pos, rec_end, base, n, "header value")
                pos += cur_field(&hval, d + pos, n, end - pos)
            cur_store(&hkey)
            cur_store(&hval)
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
        cols_close_record(c, control)
        c.offset.n += 8
        c.timestamp.n += 8
        c.tstype.n += 4 if spark else 1
    cur_store(&key)
    cur_store(&value)
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


cdef object _legacy(Builder builder, object buf, Py_ssize_t pos, bint validate_crc,
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
    numpy_ready()
    if not (type(max_decompressed_size) is int and 0 <= max_decompressed_size < _MAXSIZE):
        max_decompressed_size = check_max_size(max_decompressed_size)
    cdef Buf b = get_buf(buf)
    cdef const uint8_t* p = b.ptr
    cdef Py_ssize_t size = b.size, pos = 0, rem, batches = 0
    cdef int32_t length
    cdef uint8_t magic
    cdef Builder builder = Builder(include_control, large, spark, _wide_at)
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


def join_values(offsets, data, end):
    """The values of a binary column (``offsets``: n + 1 int32 or int64, ``data``: their
    bytes) each followed by ``end``, as one bytes object: a consumer's raw lines, without a
    bytes object per value."""
    cdef const uint8_t[::1] d = memoryview(data).cast("B") if len(data) else b"\0"
    cdef bytes sep = bytes(end)
    cdef Py_ssize_t k = len(sep), n = len(offsets) - 1, i, size = 0, lo, hi, at = 0
    cdef Py_ssize_t limit = len(data)
    cdef const int32_t[::1] o32
    cdef const int64_t[::1] o64
    cdef bint wide = offsets.dtype.itemsize == 8
    if n <= 0:
        return b""
    if wide:
        o64 = offsets
    else:
        o32 = offsets
    for i in range(n):
        lo = o64[i] if wide else o32[i]
        hi = o64[i + 1] if wide else o32[i + 1]
        if lo < 0 or hi < lo or hi > limit:
            raise ValueError(f"offsets {lo}..{hi} of value {i} are outside the column's "
                             f"{limit} bytes")
        size += hi - lo + k
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* w = PyBytes_AS_STRING(out)
    cdef const char* sp = sep
    for i in range(n):
        lo = o64[i] if wide else o32[i]
        hi = o64[i + 1] if wide else o32[i + 1]
        if hi > lo:
            memcpy(w + at, &d[lo], hi - lo)
            at += hi - lo
        if k:
            memcpy(w + at, sp, k)
            at += k
    return out
