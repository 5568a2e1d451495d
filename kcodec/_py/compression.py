"""Compression of Kafka record payloads, every codec, bounded: the pure-Python twin.

The registry (codec ids and names, levels, the dispatch; kcodec._codecs.registry) is the
same for both twins; this twin hands it its own snappy (kcodec._py.xerial) and the lz4 frame
path of kcodec._codecs.lz4_codec. ``kcodec._cy.compression`` gives the same results and
errors with the compiled xerial twin and a C fast path for plain lz4 frames. See
``kcodec.compression`` for the codecs, the levels and the limits.
"""

from __future__ import annotations

from typing import Any

from kcodec._codecs import lz4_codec, registry
from kcodec._codecs.registry import CodecLike
from kcodec._limits import DEFAULT_MAX_SIZE
from kcodec._py.xerial import snappy_decompress, xerial_compress

__all__ = ["compress", "decompress"]


def compress(codec: CodecLike, data: Any, level: int | None = None, *, magic: int = 2) -> bytes:
    """Compress ``data`` with ``codec`` as Kafka writes it for record format ``magic``.

    snappy writes snappy-java's xerial framing (32 KiB blocks); lz4 writes a frame of
    independent 64 KiB blocks, with Kafka's legacy header checksum for ``magic=0``.
    """
    return registry.compress(codec, data, level, magic, xerial_compress)


def decompress(
    codec: CodecLike, data: Any, max_size: int = DEFAULT_MAX_SIZE, *, magic: int = 2
) -> bytes:
    """Decompress ``data``, producing at most ``max_size`` bytes (else DecompressionLimitError)."""
    return registry.decompress(codec, data, max_size, magic, snappy_decompress,
                               lz4_codec.decompress)
