"""Snappy for Kafka: snappy-java's xerial framing and raw snappy blocks, with a bounded output.

Wire layout (integers big-endian unless noted):

    xerial_stream := header chunk*
    header        := magic version:int32 compatible:int32           16 bytes
    magic         := 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00              detected by the magic only:
                                                                    some producers write the two
                                                                    ints little-endian
    chunk         := length:int32 block:byte[length]                0 <= length <= bytes left;
                                                                    length 0 means no block
    block         := preamble:uvarint element*                      one raw snappy block
    preamble      := uncompressed length, little-endian base-128,   at most 5 bytes, < 2**32

A snappy stream that does not start with the magic is one raw snappy block (as librdkafka
writes and snappy-java's reader accepts). Writing uses the xerial framing with 32 KiB blocks,
as snappy-java does (Kafka's Java client), with version 1 and compatible version 1; empty
input gives one empty block (some readers want more than the header).

Bounded output: every block's preamble gives its uncompressed length, so all of them are read
and summed against ``max_size`` BEFORE anything is allocated or decompressed
(DecompressionLimitError). A preamble larger than the block could possibly expand to (an
element of n input bytes yields at most 64/3 n output bytes) is a CorruptDataError, so no
allocation exceeds what the input justifies. The blocks themselves are decoded by cramjam.

This is the pure-Python twin; ``kcodec._cy.xerial`` gives the same results and errors.
"""

from __future__ import annotations

from typing import Any

from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec.errors import CorruptDataError, DecompressionLimitError, UnsupportedCodecError

__all__ = [
    "XERIAL_MAGIC",
    "XERIAL_HEADER",
    "XERIAL_BLOCK_SIZE",
    "is_xerial",
    "xerial_compress",
    "xerial_decompress",
    "snappy_decompress",
]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
XERIAL_BLOCK_SIZE = 32 * 1024
_MAX_BLOCK_SIZE = 1 << 30


def _snappy() -> Any:
    try:
        import cramjam

        return cramjam.snappy
    except (ImportError, AttributeError):  # AttributeError: a None stand-in in sys.modules
        raise UnsupportedCodecError("snappy", "cramjam") from None


def _view(data: Any) -> memoryview:
    """A flat unsigned-byte view of any buffer-protocol object (a copy only if not contiguous)."""
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None
    if mv.ndim == 1 and mv.format == "B":
        if mv.c_contiguous:
            return mv
    elif mv.c_contiguous:
        return mv.cast("B")
    return memoryview(mv.tobytes())


def _max_compressed(n: int) -> int:
    """snappy's worst case for n input bytes."""
    return 32 + n + n // 6


def is_xerial(data: Any) -> bool:
    """True when ``data`` starts with the xerial magic (the header ints are not checked)."""
    mv = _view(data)
    return len(mv) >= 8 and mv[:8] == XERIAL_MAGIC


def xerial_compress(data: Any, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """``data`` in xerial framing: the header, then one chunk per ``block_size`` input bytes."""
    if not isinstance(block_size, int) or not 1 <= block_size <= _MAX_BLOCK_SIZE:
        raise ValueError(f"block_size must be an int in 1..{_MAX_BLOCK_SIZE}, not {block_size!r}")
    snappy = _snappy()
    src = _view(data)
    n = len(src)
    blocks = max(1, (n + block_size - 1) // block_size)
    out = bytearray(16 + blocks * (4 + _max_compressed(block_size)))
    dst = memoryview(out)
    dst[:16] = XERIAL_HEADER
    pos = 16
    # Empty input still gets one (empty) block: readers that want more than the header
    # (kafka-python, aiokafka) then read it too.
    for start in range(0, max(n, 1), block_size):
        written = snappy.compress_raw_into(src[start : start + block_size], dst[pos + 4 :])
        dst[pos : pos + 4] = written.to_bytes(4, "big")
        pos += 4 + written
    return bytes(dst[:pos])


def _preamble(src: memoryview, pos: int, end: int) -> tuple[int, int]:
    """(uncompressed length, preamble size) of the raw snappy block at src[pos:end]."""
    value = 0
    for i in range(5):
        if pos + i >= end:
            raise CorruptDataError("truncated snappy length preamble", pos)
        byte = src[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if value > 0xFFFFFFFF:
                raise CorruptDataError("snappy length preamble overflows 32 bits", pos)
            return value, i + 1
    raise CorruptDataError("snappy length preamble longer than 5 bytes", pos)


def _check_block(src: memoryview, pos: int, end: int, budget: int, max_size: int) -> int:
    """The block's uncompressed length, checked against the budget and its own size."""
    ulen, plen = _preamble(src, pos, end)
    if ulen > budget:
        raise DecompressionLimitError("snappy", max_size, pos)
    # Every snappy element of k bytes yields at most 64 * k / 3 bytes (a 3-byte copy of 64),
    # and at least one byte: an empty block is its preamble alone.
    if 3 * ulen > 64 * (end - pos - plen) or (ulen == 0 and end - pos != plen):
        raise CorruptDataError(
            f"snappy block claims {ulen} bytes from {end - pos} compressed bytes", pos
        )
    return ulen


def _decode_into(snappy: Any, src: memoryview, pos: int, end: int, dst: memoryview, ulen: int) -> None:
    try:
        got = snappy.decompress_raw_into(src[pos:end], dst)
    except Exception as exc:  # cramjam.DecompressionError and friends
        raise CorruptDataError("corrupt snappy block", pos) from exc
    if got != ulen:
        raise CorruptDataError(f"snappy block produced {got} bytes, its preamble says {ulen}", pos)


def xerial_decompress(data: Any, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompress a xerial-framed snappy stream of at most ``max_size`` output bytes."""
    limit = check_max_size(max_size)
    src = _view(data)
    n = len(src)
    if n < 8 or src[:8] != XERIAL_MAGIC:
        raise CorruptDataError("not a xerial snappy stream: bad magic", 0)
    if n < 16:
        raise CorruptDataError(f"truncated xerial header: {n} of 16 bytes", 0)
    # Pass 1: walk the chunks and sum the preambles before allocating anything.
    chunks = []
    total = 0
    pos = 16
    while pos < n:
        if n - pos < 4:
            raise CorruptDataError(f"truncated xerial chunk length: {n - pos} of 4 bytes", pos)
        length = int.from_bytes(src[pos : pos + 4], "big", signed=True)
        if length < 0:
            raise CorruptDataError(f"negative xerial chunk length {length}", pos)
        if length > n - pos - 4:
            raise CorruptDataError(
                f"xerial chunk length {length} overruns the stream: {n - pos - 4} bytes remain", pos
            )
        start = pos + 4
        pos = start + length
        if length:
            ulen = _check_block(src, start, pos, limit - total, max_size)
            if ulen:
                chunks.append((start, pos, ulen))
            total += ulen
    if total == 0:
        return b""
    # Pass 2: decode every block straight into its place in the output.
    snappy = _snappy()
    out = bytearray(total)
    dst = memoryview(out)
    at = 0
    for start, end, ulen in chunks:
        _decode_into(snappy, src, start, end, dst[at : at + ulen], ulen)
        at += ulen
    return bytes(out)


def snappy_decompress(data: Any, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Kafka snappy: a xerial stream when it starts with the magic, else one raw snappy block."""
    limit = check_max_size(max_size)
    src = _view(data)
    n = len(src)
    if n >= 8 and src[:8] == XERIAL_MAGIC:
        return xerial_decompress(src, max_size)
    ulen = _check_block(src, 0, n, limit, max_size)
    if ulen == 0:
        return b""
    snappy = _snappy()
    out = bytearray(ulen)
    _decode_into(snappy, src, 0, n, memoryview(out), ulen)
    return bytes(out)

