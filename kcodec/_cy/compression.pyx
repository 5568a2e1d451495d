"""Compiled twin of kcodec._py.compression (see it and kcodec.compression): the same
registry, with the compiled xerial twin for snappy and, for lz4, plain Kafka-style frames
decoded from C (kcodec._cy._lz4) before the general frame path of kcodec._codecs.lz4_codec."""

from kcodec._cy._lz4 cimport lz4_frame

import sys

from kcodec._codecs import lz4_codec, registry
from kcodec._cy.xerial import snappy_decompress, xerial_compress
from kcodec._limits import DEFAULT_MAX_SIZE

__all__ = ["compress", "decompress"]


def compress(codec, data, level=None, *, magic=2):
    """Compress ``data`` with ``codec`` as Kafka writes it for record format ``magic``.

    snappy writes snappy-java's xerial framing (32 KiB blocks); lz4 writes a frame of
    independent 64 KiB blocks, with Kafka's legacy header checksum for ``magic=0``.
    """
    return registry.compress(codec, data, level, magic, xerial_compress)


def decompress(codec, data, max_size=DEFAULT_MAX_SIZE, *, magic=2):
    """Decompress ``data``, producing at most ``max_size`` bytes (else DecompressionLimitError)."""
    cdef object out
    # lz4 named by its id, with a limit and a magic the registry would take as they are: a
    # plain Kafka-style frame is decoded from C at once (the broker checks every produced
    # batch so); anything else goes the registry's way, which gives the same bytes or error
    if (type(codec) is int and codec == 3 and type(max_size) is int
            and 0 <= max_size < sys.maxsize and type(magic) is int and 0 <= magic <= 2):
        out = lz4_frame(data, max_size, magic)
        if out is not None:
            return out
    return registry.decompress(codec, data, max_size, magic, snappy_decompress, _lz4)


def _lz4(data, Py_ssize_t max_size, int magic):
    cdef object out = lz4_frame(data, max_size, magic)   # None: not a plain frame
    if out is not None:
        return out
    return lz4_codec.decompress(data, max_size, magic)


cdef object decompress_codec(int codec, object data, Py_ssize_t max_size, int magic):
    cdef object out
    if codec == 3:
        out = lz4_frame(data, max_size, magic)
        if out is not None:
            return out
    return decompress(codec, data, max_size, magic=magic)
