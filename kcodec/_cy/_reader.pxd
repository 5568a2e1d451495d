# The one bounds-checked reader of the compiled twins.
#
# Every C-level read of untrusted bytes goes through these inline functions. A Reader is a
# (pointer, end, position) triple over a buffer the caller holds (see Buf below); ``base``
# is added to positions in error messages so offsets are absolute in the caller's input.
# The raise_* helpers build the same kcodec.errors exceptions, with the same fields, as the
# pure-Python twins do.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_C_CONTIGUOUS


cdef struct Reader:
    const uint8_t* data
    Py_ssize_t pos
    Py_ssize_t end
    Py_ssize_t base


cdef class Buf:
    """Holds a contiguous byte view of any buffer-protocol object for one call."""
    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t* ptr
    cdef Py_ssize_t size


cdef Buf get_buf(object obj)
cdef int raise_truncated(Py_ssize_t need, Py_ssize_t offset, Py_ssize_t available, str what) except -1
cdef int raise_corrupt(str message, Py_ssize_t offset) except -1
cdef int raise_decode(str message, Py_ssize_t offset) except -1
cdef int raise_encode(str message) except -1


cdef inline int need(Reader* r, Py_ssize_t n, str what) except -1:
    if n < 0:
        raise_corrupt(f"negative length {n} for {what}", r.pos + r.base)
    if n > r.end - r.pos:
        raise_truncated(n, r.pos + r.base, r.end - r.pos, what)
    return 0


cdef inline uint8_t be_u8(const uint8_t* p) noexcept nogil:
    return p[0]

cdef inline uint16_t be_u16(const uint8_t* p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]

cdef inline uint32_t be_u32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]

cdef inline uint64_t be_u64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>be_u32(p) << 32) | be_u32(p + 4)

cdef inline void put_u16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void put_u32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void put_u64(uint8_t* p, uint64_t v) noexcept nogil:
    put_u32(p, <uint32_t>(v >> 32))
    put_u32(p + 4, <uint32_t>v)


cdef inline int read_i8(Reader* r, int8_t* out, str what) except -1:
    need(r, 1, what)
    out[0] = <int8_t>r.data[r.pos]
    r.pos += 1
    return 0

cdef inline int read_i16(Reader* r, int16_t* out, str what) except -1:
    need(r, 2, what)
    out[0] = <int16_t>be_u16(r.data + r.pos)
    r.pos += 2
    return 0

cdef inline int read_i32(Reader* r, int32_t* out, str what) except -1:
    need(r, 4, what)
    out[0] = <int32_t>be_u32(r.data + r.pos)
    r.pos += 4
    return 0

cdef inline int read_u32(Reader* r, uint32_t* out, str what) except -1:
    need(r, 4, what)
    out[0] = be_u32(r.data + r.pos)
    r.pos += 4
    return 0

cdef inline int read_i64(Reader* r, int64_t* out, str what) except -1:
    need(r, 8, what)
    out[0] = <int64_t>be_u64(r.data + r.pos)
    r.pos += 8
    return 0


cdef inline int read_uvar(Reader* r, uint64_t* out, int max_bytes, int bits, str kind) except -1:
    """Unsigned base-128 varint of at most max_bytes bytes and at most ``bits`` bits."""
    cdef Py_ssize_t start = r.pos
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef int n = 0
    cdef uint8_t b
    cdef const uint8_t* p
    if r.end - r.pos >= max_bytes:
        # Fast path: max_bytes are there, so no per-byte bounds checks. Anything odd (too
        # long, too wide) falls through to the careful loop below, which raises.
        p = r.data + r.pos
        if p[0] < 0x80:
            out[0] = p[0]
            r.pos += 1
            return 0
        result = p[0] & 0x7F
        for n in range(1, max_bytes - 1):
            b = p[n]
            result |= (<uint64_t>(b & 0x7F)) << (7 * n)
            if b < 0x80:
                out[0] = result
                r.pos += n + 1
                return 0
        b = p[max_bytes - 1]
        if (b >> (bits - 7 * (max_bytes - 1))) == 0:
            out[0] = result | ((<uint64_t>b) << (7 * (max_bytes - 1)))
            r.pos += max_bytes
            return 0
        result = 0
        n = 0
    while True:
        if r.pos >= r.end:
            raise_truncated(n + 1, start + r.base, r.end - start, kind)
        b = r.data[r.pos]
        r.pos += 1
        n += 1
        if n == max_bytes:
            if b & 0x80:
                raise_corrupt(f"{kind} too long: more than {max_bytes} bytes", start + r.base)
            if (b >> (bits - shift)) != 0:
                raise_corrupt(f"{kind} overflows {bits} bits", start + r.base)
        result |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = result
            return 0
        shift += 7


cdef inline int read_uvarint(Reader* r, uint32_t* out, str kind) except -1:
    cdef uint64_t u
    read_uvar(r, &u, 5, 32, kind)
    out[0] = <uint32_t>u
    return 0

cdef inline int read_varint(Reader* r, int32_t* out, str kind) except -1:
    cdef uint64_t u
    read_uvar(r, &u, 5, 32, kind)
    out[0] = <int32_t>((<uint32_t>u >> 1) ^ (-(<int32_t>(u & 1))))
    return 0

cdef inline int read_varlong(Reader* r, int64_t* out, str kind) except -1:
    cdef uint64_t u
    read_uvar(r, &u, 10, 64, kind)
    out[0] = <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
    return 0


# Varints of one or two bytes (almost every length, delta and count of a record) are read in
# place by the record loops; anything longer, or cut short at ``end``, is left where it is
# for the exact reads above. Forced inline in C: a compiler will not inline on its own a
# function called eight times per record, and the loops lost a tenth of their speed.
cdef extern from *:
    """
    #if defined(_MSC_VER)
    #define KC_FORCE_INLINE static __forceinline
    #elif defined(__GNUC__) || defined(__clang__)
    #define KC_FORCE_INLINE static inline __attribute__((always_inline))
    #else
    #define KC_FORCE_INLINE static inline
    #endif
    KC_FORCE_INLINE int kc_var12(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                                 uint64_t* u) {
        Py_ssize_t p = *pos;
        if (p < end) {
            uint8_t b = d[p];
            if (b < 0x80) { *u = b; *pos = p + 1; return 1; }
            if (p + 1 < end && d[p + 1] < 0x80) {
                *u = (uint64_t)(b & 0x7F) | ((uint64_t)d[p + 1] << 7);
                *pos = p + 2;
                return 1;
            }
        }
        return 0;
    }
    """
    bint kc_var12(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, uint64_t* u) noexcept nogil


cdef inline bint fast_varint(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                             int32_t* out) noexcept nogil:
    """A zigzag varint of one or two bytes at d[pos[0]]: True with pos[0] moved past it, or
    False with nothing moved (read it with read_varint then)."""
    cdef uint64_t u
    if kc_var12(d, pos, end, &u):
        out[0] = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        return True
    return False

cdef inline bint fast_varlong(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                              int64_t* out) noexcept nogil:
    """The same for a zigzag varlong (read_varlong for the rest)."""
    cdef uint64_t u
    if kc_var12(d, pos, end, &u):
        out[0] = <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        return True
    return False


cdef inline Py_ssize_t uvar_size(uint64_t u) noexcept nogil:
    cdef Py_ssize_t n = 1
    while u > 0x7F:
        u >>= 7
        n += 1
    return n

cdef inline Py_ssize_t put_uvar(uint8_t* p, uint64_t u) noexcept nogil:
    """Write u as a base-128 varint at p (caller reserved uvar_size bytes); returns bytes written."""
    cdef Py_ssize_t n = 0
    while u > 0x7F:
        p[n] = <uint8_t>((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    p[n] = <uint8_t>u
    return n + 1

cdef inline uint64_t zigzag64(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)

cdef inline uint32_t zigzag32(int32_t v) noexcept nogil:
    return (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)
