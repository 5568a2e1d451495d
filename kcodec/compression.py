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
"""

from __future__ import annotations

import enum
from typing import Any, Union

from kcodec import xerial as _xerial
from kcodec._codecs import gzip_codec, lz4_codec, zstd_codec
from kcodec._codecs._util import view as _view
from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec.errors import (
    DecompressionLimitError,
    EncodeError,
    KcodecError,
    UnsupportedCodecError,
)

__all__ = [
    "Codec",
    "DEFAULT_LEVELS",
    "LEVEL_RANGES",
    "DEFAULT_MAX_SIZE",
    "CODEC_MASK",
    "compress",
    "decompress",
    "codec_of",
    "codec_info",
    "CODEC_NAMES",
]

CODEC_MASK = 0x07  # the codec bits of a batch's or a message's attributes


class Codec(enum.IntEnum):
    """Kafka's compression codec ids."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


DEFAULT_LEVELS: dict[Codec, int | None] = {
    Codec.NONE: None,
    Codec.GZIP: gzip_codec.DEFAULT_LEVEL,
    Codec.SNAPPY: None,
    Codec.LZ4: lz4_codec.DEFAULT_LEVEL,
    Codec.ZSTD: zstd_codec.DEFAULT_LEVEL,
}
"""Kafka's default level per codec (None: the codec has no levels)."""

LEVEL_RANGES: dict[Codec, range | None] = {
    Codec.NONE: None,
    Codec.GZIP: gzip_codec.LEVELS,
    Codec.SNAPPY: None,
    Codec.LZ4: lz4_codec.LEVELS,
    Codec.ZSTD: zstd_codec.LEVELS,
}
"""The levels Kafka accepts per codec (gzip also takes -1, zlib's default)."""

_PACKAGES = {Codec.GZIP: None, Codec.SNAPPY: "cramjam", Codec.LZ4: "lz4", Codec.ZSTD: "zstandard"}
_NAMES = {c.name.lower(): c for c in Codec}
CODEC_NAMES = tuple(_NAMES)
"""The codec names, in id order ("none", "gzip", "snappy", "lz4", "zstd"): what Kafka's
``compression.type`` takes; ``codec_of(name)`` gives the Codec."""

CodecLike = Union[int, str, Codec]


def codec_of(codec: Any) -> Codec:
    """``codec`` (an id, a Codec or a name such as "gzip") as a Codec; else UnsupportedCodecError."""
    if isinstance(codec, Codec):
        return codec
    if isinstance(codec, str):
        found = _NAMES.get(codec.strip().lower())
        if found is not None:
            return found
    elif isinstance(codec, int) and not isinstance(codec, bool) and 0 <= codec <= 4:
        return Codec(codec)
    raise UnsupportedCodecError(codec)


def _level(codec: Codec, level: Any) -> int:
    if level is None:
        return DEFAULT_LEVELS[codec]  # type: ignore[return-value]
    levels = LEVEL_RANGES[codec]
    if levels is None:
        raise EncodeError(f"{codec.name.lower()} has no compression levels (got {level!r})")
    if not isinstance(level, int) or isinstance(level, bool):
        raise EncodeError(f"{codec.name.lower()} level must be an int, not {level!r}")
    if codec is Codec.GZIP and level == -1:
        return gzip_codec.DEFAULT_LEVEL
    if level not in levels:
        raise EncodeError(
            f"{codec.name.lower()} level {level} out of range {levels.start}..{levels.stop - 1}"
        )
    return level


def _magic(magic: Any) -> int:
    if magic not in (0, 1, 2) or isinstance(magic, bool):
        raise ValueError(f"magic must be 0, 1 or 2, not {magic!r}")
    return int(magic)


def compress(codec: CodecLike, data: Any, level: int | None = None, *, magic: int = 2) -> bytes:
    """Compress ``data`` with ``codec`` as Kafka writes it for record format ``magic``.

    snappy writes snappy-java's xerial framing (32 KiB blocks); lz4 writes a frame of
    independent 64 KiB blocks, with Kafka's legacy header checksum for ``magic=0``.
    """
    c = codec_of(codec)
    lvl = _level(c, level)
    m = _magic(magic)
    src = _view(data)
    if c is Codec.NONE:
        return bytes(src)
    if c is Codec.GZIP:
        return gzip_codec.compress(src, lvl, m)
    if c is Codec.SNAPPY:
        return _xerial.xerial_compress(src)
    if c is Codec.LZ4:
        return lz4_codec.compress(src, lvl, m)
    return zstd_codec.compress(src, lvl, m)


def decompress(
    codec: CodecLike, data: Any, max_size: int = DEFAULT_MAX_SIZE, *, magic: int = 2
) -> bytes:
    """Decompress ``data``, producing at most ``max_size`` bytes (else DecompressionLimitError)."""
    c = codec_of(codec)
    limit = check_max_size(max_size)
    m = _magic(magic)
    src = _view(data)
    if c is Codec.NONE:
        if len(src) > limit:
            raise DecompressionLimitError("none", limit, 0)
        return bytes(src)
    if c is Codec.GZIP:
        return gzip_codec.decompress(src, limit, m)
    if c is Codec.SNAPPY:
        return _xerial.snappy_decompress(src, limit)
    if c is Codec.LZ4:
        return lz4_codec.decompress(src, limit, m)
    return zstd_codec.decompress(src, limit, m)


def _library(codec: Codec) -> tuple[str | None, str | None]:
    if codec is Codec.NONE:
        return None, None
    if codec is Codec.GZIP:
        return gzip_codec.library()
    if codec is Codec.SNAPPY:
        try:
            import cramjam
        except ImportError:
            raise UnsupportedCodecError("snappy", "cramjam") from None
        return "cramjam", cramjam.__version__
    if codec is Codec.LZ4:
        return lz4_codec.library()
    return zstd_codec.library()


def codec_info() -> list[dict[str, Any]]:
    """Each codec: name, id, library, version, available, default_level, package to install."""
    rows = []
    for c in Codec:
        try:
            library, version = _library(c)
            available = True
        except KcodecError:
            library, version, available = None, None, False
        rows.append(
            {
                "name": c.name.lower(),
                "id": int(c),
                "library": library,
                "version": version,
                "available": available,
                "default_level": DEFAULT_LEVELS[c],
                "package": _PACKAGES.get(c),
            }
        )
    return rows
