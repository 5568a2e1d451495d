"""Every Kafka compression codec behind one registry, with bounded decompression.

    >>> from kcodec.compression import Codec, compress, decompress
    >>> blob = compress("zstd", b"kafka" * 100)          # Kafka's default level (3)
    >>> decompress(Codec.ZSTD, blob)[:10]
    b'kafkakafka'

Codec ids are the low three bits of a batch's attributes:

    id  name    library (pip package)            levels (Kafka's)      default
    0   none    -                                 -                     -
    1   gzip    zlib (standard library)           1..9, -1 = zlib's 6   6
    2   snappy  cramjam; xerial framing is ours   -                     -
    3   lz4     lz4 (lz4.frame)                   1..17                 9
    4   zstd    compression.zstd (3.14+) or       -131072..22           3
                zstandard

``compress(codec, data, level=None, *, magic=2)`` and
``decompress(codec, data, max_size=DEFAULT_MAX_SIZE, *, magic=2)`` take the codec as an id,
a ``Codec`` or a name, and ``data`` as any buffer-protocol object; both return ``bytes``.
``magic`` is the record format the bytes belong to: it matters for lz4 only, whose magic-0
messages use Kafka's legacy frame header checksum (see ``kcodec._codecs.lz4_codec``).

Decompression never produces more than ``max_size`` bytes (DEFAULT_MAX_SIZE, 100 MiB; see
``kcodec._limits`` for why): past it, DecompressionLimitError, raised before the memory is
spent (most bombs fail from their headers alone). Pass a larger ``max_size`` to allow more.
Corrupt input raises CorruptDataError, an unknown codec or a missing library
UnsupportedCodecError naming the pip package; library exceptions never leak.

The registry is kcodec._codecs.registry; ``compress`` and ``decompress`` come from the twin
chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``), each with its own snappy.
"""

from __future__ import annotations

from kcodec._codecs.registry import (
    CODEC_MASK,
    CODEC_NAMES,
    DEFAULT_LEVELS,
    LEVEL_RANGES,
    Codec,
    codec_info,
    codec_of,
)
from kcodec._impl import IMPLEMENTATION
from kcodec._limits import DEFAULT_MAX_SIZE

if IMPLEMENTATION == "cython":
    from kcodec._cy.compression import *  # noqa: F401,F403
else:
    from kcodec._py.compression import *  # noqa: F401,F403

__all__ = [
    "Codec",
    "DEFAULT_LEVELS",
    "LEVEL_RANGES",
    "DEFAULT_MAX_SIZE",
    "CODEC_MASK",
    "compress",  # noqa: F405 (from the twin)
    "decompress",  # noqa: F405
    "codec_of",
    "codec_info",
    "CODEC_NAMES",
]
