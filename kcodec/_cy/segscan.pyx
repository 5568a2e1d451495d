# The fast path of a log segment's recovery scan: runs of whole, valid v2 batches.
#
# Wire layout read (the v2 batch header):
#
#     base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 (= 2)
#     | crc uint32 (CRC-32C of attributes .. end) | attributes int16 | last_offset_delta int32
#     | first_timestamp int64 | max_timestamp int64 | producer_id int64 | producer_epoch int16
#     | base_sequence int32 | record_count int32 | records ...       61 header bytes
#
# The compiled twin of kcodec._py.segscan (same results): the loop touches no Python object
# and runs without the GIL, so a segment of many small batches is scanned at CRC speed.
# scan_records_v2 walks one batch's records section (see the pure twin for the grammar),
# building no record objects: first a walk that touches no Python object and calls nothing
# (every varint decoded in place, every length checked against its record's end), which
# answers for a well-formed section; anything it does not take (a length out of bounds, a
# varint too long or too wide, fields that do not fill their record) sends the section
# through the bounds-checked reader instead, which gives the result or the error the pure
# twin gives. The broker runs this on every produced batch: the reader's calls cost 12-20
# ns a record, the walk 3-5.

from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kcodec._cy._reader cimport (
    Buf,
    Reader,
    be_u32,
    be_u64,
    get_buf,
    kc_var12,
    need,
    raise_corrupt,
    read_varint,
    read_varlong,
)
from kcodec._cy.crc cimport crc32c_update

__all__ = ["scan_valid_v2", "scan_records_v2"]

cdef int64_t _INT32_MAX = 2147483647


def scan_valid_v2(buf, start=0, base_offset=0):
    """Skip the valid v2 batches from ``start``: returns ``(position, batches, records,
    first_offset, last_offset, max_timestamp)`` where ``position`` is where the scan stopped
    (the end of the last valid batch), the offsets are None when no batch was valid, and
    ``max_timestamp`` is -1 then."""
    cdef Buf b = get_buf(buf)
    cdef const uint8_t* p = b.ptr
    cdef Py_ssize_t end = b.size
    if not 0 <= start <= end:
        raise ValueError(f"start {start} outside a buffer of {end} bytes")
    if not -9223372036854775808 <= base_offset <= 9223372036854775807:
        raise ValueError(f"base offset {base_offset} is not an int64")
    cdef Py_ssize_t pos = start
    cdef int64_t base = base_offset
    cdef int64_t top = INT64_MAX if base > INT64_MAX - _INT32_MAX else base + _INT32_MAX
    cdef int64_t first = 0, last = 0, max_ts = -1, bo, ts
    cdef int64_t count = 0, records = 0
    cdef int32_t length, lod, n
    cdef const uint8_t* q
    with nogil:
        while end - pos >= 61:
            q = p + pos
            length = <int32_t>be_u32(q + 8)
            if length < 49 or length > end - pos - 12 or q[16] != 2:
                break
            n = <int32_t>be_u32(q + 57)
            lod = <int32_t>be_u32(q + 23)
            bo = <int64_t>be_u64(q)
            if n < 0 or lod < 0 or bo < base or bo > top - lod:
                break
            if crc32c_update(0, q + 21, <size_t>(length - 9)) != be_u32(q + 17):
                break
            ts = <int64_t>be_u64(q + 35)
            if count == 0:
                first = bo
            count += 1
            records += n
            last = bo + lod
            if ts > max_ts:
                max_ts = ts
            pos += 12 + <Py_ssize_t>length
    if count == 0:
        return pos, 0, 0, None, None, -1
    return pos, count, records, first, last, max_ts


cdef extern from *:
    """
    /* An unsigned base-128 varint of at most max_bytes bytes and at most bits bits at
       d[*pos], before end: 1 with *pos moved past it, 0 with nothing moved when it is cut
       short, longer or wider (the careful reader then says which). */
    static inline int kc_uvar(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                              int max_bytes, int bits, uint64_t* out) {
        Py_ssize_t p = *pos;
        uint64_t result = 0;
        int n;
        for (n = 0; n < max_bytes; n++) {
            uint8_t b;
            if (p + n >= end)
                return 0;
            b = d[p + n];
            if (n == max_bytes - 1) {
                if ((b & 0x80) || (b >> (bits - 7 * n)) != 0)
                    return 0;
            }
            result |= (uint64_t)(b & 0x7F) << (7 * n);
            if (b < 0x80) {
                *out = result;
                *pos = p + n + 1;
                return 1;
            }
        }
        return 0;
    }
    """
    bint kc_uvar(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, int max_bytes, int bits,
                 uint64_t* out) noexcept nogil


cdef inline bint _var32(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                        int32_t* out) noexcept nogil:
    cdef uint64_t u
    if not kc_var12(d, pos, end, &u) and not kc_uvar(d, pos, end, 5, 32, &u):
        return False
    out[0] = <int32_t>((<uint32_t>u >> 1) ^ (-(<int32_t>(u & 1))))
    return True


cdef inline bint _skip(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                       bint nullable) noexcept nogil:
    """A length-prefixed field: True with pos[0] past it."""
    cdef int32_t n
    if not _var32(d, pos, end, &n):
        return False
    if n == -1 and nullable:
        return True
    if n < 0 or n > end - pos[0]:
        return False
    pos[0] += n
    return True


cdef inline void _tally(int64_t i, int32_t od, int64_t first, int64_t delta, int64_t* bad,
                        int64_t* min_ts, int64_t* max_ts) noexcept nogil:
    """Record ``i``'s part of the result, the same in both walks: the first index whose
    offset delta is not its own, and the least and greatest timestamps."""
    cdef int64_t ts = <int64_t>(<uint64_t>first + <uint64_t>delta)
    if od != i and bad[0] < 0:
        bad[0] = i
    if ts > max_ts[0]:
        max_ts[0] = ts
    if i == 0 or ts < min_ts[0]:
        min_ts[0] = ts


cdef bint _walk_records(const uint8_t* d, Py_ssize_t end, int64_t n, int64_t first,
                        int64_t* min_out, int64_t* max_out, int64_t* bad_out) noexcept nogil:
    """The whole section well formed: True with the results set; False to leave it to the
    careful reader (nothing is set then)."""
    cdef Py_ssize_t pos = 0, rend
    cdef int64_t i, delta, min_ts = -1, max_ts = -1, bad = -1
    cdef int32_t length, od, headers, h
    cdef uint64_t u
    for i in range(n):
        if not _var32(d, &pos, end, &length) or length < 1 or length > end - pos:
            return False
        rend = pos + length
        pos += 1                                        # attributes
        if not kc_var12(d, &pos, rend, &u) and not kc_uvar(d, &pos, rend, 10, 64, &u):
            return False
        delta = <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        if not _var32(d, &pos, rend, &od):
            return False
        _tally(i, od, first, delta, &bad, &min_ts, &max_ts)
        if not _skip(d, &pos, rend, True) or not _skip(d, &pos, rend, True):
            return False
        if not _var32(d, &pos, rend, &headers) or headers < 0:
            return False
        for h in range(headers):
            if not _skip(d, &pos, rend, False) or not _skip(d, &pos, rend, True):
                return False
        if pos != rend:
            return False
    if pos != end:
        return False
    min_out[0] = min_ts
    max_out[0] = max_ts
    bad_out[0] = bad
    return True


cdef int _skip_bytes(Reader* r, bint nullable, str what, str length_kind) except -1:
    cdef int32_t n
    read_varint(r, &n, length_kind)
    if nullable and n == -1:
        return 0
    need(r, n, what)
    r.pos += n
    return 0


def scan_records_v2(buf, count, first_timestamp):
    """Check ``count`` records filling ``buf`` (a v2 batch's records section): returns
    ``(min_timestamp, max_timestamp, bad_delta)`` (see the module doc); raises the
    reader's errors."""
    cdef Buf b = get_buf(buf)
    if count < 0:
        raise ValueError(f"record count {count} is negative")
    cdef int64_t n = count
    cdef int64_t first = first_timestamp
    cdef int64_t lo, hi, wrong
    if _walk_records(b.ptr, b.size, n, first, &lo, &hi, &wrong):
        return lo, hi, wrong
    cdef Reader r
    r.data = b.ptr
    r.pos = 0
    r.end = b.size
    r.base = 0
    cdef Py_ssize_t end = b.size, rend
    cdef int64_t i, delta, min_ts = -1, max_ts = -1, bad = -1
    cdef int32_t length, od, headers, h
    for i in range(n):
        read_varint(&r, &length, "record length")
        need(&r, length, "record")
        rend = r.pos + length
        r.end = rend
        need(&r, 1, "record attributes")
        r.pos += 1
        read_varlong(&r, &delta, "timestamp delta")
        read_varint(&r, &od, "offset delta")
        _tally(i, od, first, delta, &bad, &min_ts, &max_ts)
        _skip_bytes(&r, True, "record key", "record key length")
        _skip_bytes(&r, True, "record value", "record value length")
        read_varint(&r, &headers, "header count")
        if headers < 0:
            raise_corrupt(f"negative header count {headers}", r.pos)
        for h in range(headers):
            _skip_bytes(&r, False, "header key", "header key length")
            _skip_bytes(&r, True, "header value", "header value length")
        if r.pos != rend:
            raise_corrupt(f"record length {length} but its fields took "
                          f"{length - (rend - r.pos)} bytes", rend - length)
        r.end = end
    if r.pos != end:
        raise_corrupt(f"{end - r.pos} bytes after the last of {count} records", r.pos)
    return min_ts, max_ts, bad
