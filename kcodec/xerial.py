"""Snappy as Kafka uses it: snappy-java's xerial framing and raw snappy blocks.

    >>> from kcodec.xerial import xerial_compress, snappy_decompress
    >>> snappy_decompress(xerial_compress(b"kafka" * 3))
    b'kafkakafkakafka'

``snappy_decompress(data, max_size)`` reads a xerial stream (detected by its magic) or one
raw snappy block, never producing more than ``max_size`` bytes; ``xerial_compress`` writes
32 KiB blocks as snappy-java does. See ``kcodec._py.xerial`` for the wire layout. Most
callers want ``kcodec.compression.compress/decompress`` instead.

The implementation is chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``).
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.xerial import *  # noqa: F401,F403
else:
    from kcodec._py.xerial import *  # noqa: F401,F403
