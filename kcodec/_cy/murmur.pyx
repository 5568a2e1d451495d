"""Compiled twin of kcodec._py.murmur (see its docstring for the algorithm)."""

from cpython.long cimport PyLong_AsLongAndOverflow
from libc.stdint cimport int32_t, uint32_t

from kcodec._cy._reader cimport Buf, get_buf

__all__ = ["murmur2", "partition_for_key"]


def murmur2(data):
    """The Java client's murmur2 of ``data`` (any bytes-like object): a signed 32-bit int."""
    cdef Buf b
    if type(data) is bytes:
        return _murmur2(<const unsigned char*><char*>data, len(<bytes>data))
    b = get_buf(data)
    return _murmur2(<const unsigned char*>b.ptr, b.size)


def partition_for_key(key, partition_count):
    """``(murmur2(key) & 0x7fffffff) % partition_count``."""
    cdef long n
    cdef int overflow = 0
    if type(key) is bytes and type(partition_count) is int:
        # the producer's per-record path: all in C (no Python-level murmur2 call and no
        # int objects for the hash, the mask and the modulo)
        n = PyLong_AsLongAndOverflow(partition_count, &overflow)
        if not overflow and n > 0:
            return <long>(<uint32_t>_murmur2(<const unsigned char*><char*>key,
                                             len(<bytes>key)) & 0x7FFFFFFFu) % n
    if partition_count <= 0:
        raise ValueError(f"partition count must be positive, got {partition_count}")
    return (murmur2(key) & 0x7FFFFFFF) % partition_count
