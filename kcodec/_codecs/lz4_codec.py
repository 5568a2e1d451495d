"""lz4 (codec 3): the LZ4 frame format, and Kafka's legacy frames for magic-0 messages.

    stream     := frame+
    frame      := magic:4le(0x184D2204) descriptor HC block* endmark:4le(0) [checksum:4le]
                | skippable:4le(0x184D2A50..5F) size:4le byte[size]
    descriptor := FLG BD [content_size:8le if FLG&0x08] [dict_id:4le if FLG&0x01]
    HC         := (xxh32(descriptor) >> 8) & 0xFF
    block      := size:4le (bit 31: stored uncompressed) data [checksum:4le if FLG&0x10]

Kafka before 0.10 (KAFKA-1493, fixed by KIP-57 / KAFKA-3160) computed HC over the magic
AND the descriptor: ``(xxh32(magic + descriptor) >> 8) & 0xFF``. Kafka still writes that
broken HC for magic-0 messages and ignores HC when reading them. So reading magic 0 accepts
any HC; reading magic 1 and 2 accepts the correct HC and, tolerantly, the legacy one; any
other HC is a ChecksumError. A frame whose HC is not the correct one is fed to the lz4
library with the HC repaired. Writing magic 0 gives the legacy HC and no content size
(those readers cannot skip it); magic 1 and 2 give a correct frame with its content size.
Either way: independent 64 KiB blocks, no checksums, as Kafka's Java client writes.

Levels 1..17 as Kafka's: 9, Kafka's default, uses LZ4's fast compressor as Kafka's Java
client does; any other level uses LZ4HC at that level (levels above 12 act as 12).
Bounded: a declared content size above the budget fails at once; otherwise output comes in
chunks through ``max_length`` and stops one byte past the budget.
"""

from __future__ import annotations

import functools
from typing import Any

from kcodec._codecs._util import MIN_CHUNK, drain
from kcodec._codecs.xxhash32 import xxh32
from kcodec.errors import (
    ChecksumError,
    CorruptDataError,
    DecompressionLimitError,
    UnsupportedCodecError,
)

NAME = "lz4"
PACKAGE = "lz4"
LEVELS = range(1, 18)
EXTRA_LEVELS = ()
DEFAULT_LEVEL = 9

MAGIC = 0x184D2204
_FAST_LEVEL = 9
_lz4: Any = None


def _frame_module() -> Any:
    global _lz4
    if _lz4 is None:
        try:
            import lz4.frame
        except ImportError:
            raise UnsupportedCodecError(NAME, PACKAGE) from None
        _lz4 = lz4.frame
    return _lz4


def library() -> tuple[str, str]:
    _frame_module()
    import lz4

    return "lz4", f"{lz4.__version__} (liblz4 {lz4.library_version_string()})"


@functools.lru_cache(maxsize=512)  # Kafka writes a handful of distinct descriptors
def header_checksum(header: bytes, legacy: bool = False) -> int:
    """The HC byte for ``header`` = magic + descriptor (legacy: Kafka's pre-KIP-57 value)."""
    return (xxh32(header if legacy else header[4:]) >> 8) & 0xFF


def compress(data: memoryview, level: int, magic: int) -> bytes:
    lz4f = _frame_module()
    out = lz4f.compress(
        data,
        compression_level=0 if level == _FAST_LEVEL else level,
        block_size=lz4f.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=magic >= 1,
    )
    if magic == 0:
        # Descriptor is FLG BD (no content size, no dictionary): HC at offset 6.
        out = bytearray(out)
        out[6] = header_checksum(bytes(out[:6]), legacy=True)
        out = bytes(out)
    return out


def _header(src: memoryview, pos: int, magic: int) -> tuple[int, int, bool]:
    """(offset of HC, declared content size or -1, whether HC must be repaired)."""
    n = len(src)
    if n - pos < 7:
        raise CorruptDataError(f"truncated lz4 frame header: {n - pos} bytes", pos)
    flg = src[pos + 4]
    if flg >> 6 != 1:
        raise CorruptDataError(f"unsupported lz4 frame version {flg >> 6}", pos)
    hc_pos = pos + 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if hc_pos >= n:
        raise CorruptDataError(f"truncated lz4 frame header: {n - pos} bytes", pos)
    size = int.from_bytes(src[pos + 6 : pos + 14], "little") if flg & 0x08 else -1
    header = bytes(src[pos:hc_pos])
    stored = src[hc_pos]
    correct = header_checksum(header)
    if stored == correct:
        return hc_pos, size, False
    if magic != 0 and stored != header_checksum(header, legacy=True):
        raise ChecksumError(stored, correct, hc_pos, "lz4 frame header checksum")
    return hc_pos, size, True


_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _walk(src: memoryview, pos: int, hc_pos: int) -> tuple[int, int]:
    """(end, bound) of the frame at ``pos`` whose header checksum is at ``hc_pos``: where
    its blocks, end mark and checksums end, and the most bytes those blocks can make.
    Only the framing is read; the library checks the rest."""
    n = len(src)
    flg = src[pos + 4]
    block_max = _BLOCK_MAX.get((src[pos + 5] >> 4) & 7, 4 << 20)
    tail = 4 if flg & 0x10 else 0
    p = hc_pos + 1
    bound = 0
    while True:
        if n - p < 4:
            raise CorruptDataError(f"truncated {NAME} frame", pos)
        word = int.from_bytes(src[p : p + 4], "little")
        p += 4
        if word == 0:
            break
        length = word & 0x7FFFFFFF
        if length > block_max:
            raise CorruptDataError(
                f"corrupt {NAME} frame: a block of {length} bytes in {block_max}-byte blocks", pos)
        bound += length if word >> 31 else block_max
        if length + tail > n - p:
            raise CorruptDataError(f"truncated {NAME} frame", pos)
        p += length + tail
    if flg & 0x04:
        if n - p < 4:
            raise CorruptDataError(f"truncated {NAME} frame", pos)
        p += 4
    return p, bound


def decompress(data: memoryview, max_size: int, magic: int) -> bytes:
    """Every frame of ``data`` through ``lz4.frame`` (the pure twin's path, and the compiled
    twin's for anything its fast path, kcodec._cy._lz4, leaves)."""
    lz4f = _frame_module()
    n = len(data)
    chunks: list[bytes] = []
    total = 0
    pos = 0
    while True:
        if n - pos < 4:
            raise CorruptDataError(f"truncated lz4 frame header: {n - pos} bytes", pos)
        kind = int.from_bytes(data[pos : pos + 4], "little")
        if kind == MAGIC:
            hc_pos, size, repair = _header(data, pos, magic)
            if size > max_size - total:
                raise DecompressionLimitError(NAME, max_size, pos)
            # Only this frame goes to the library (the decompressor copies the input it does
            # not use, so the whole rest made many small frames quadratic), and a declared
            # size its blocks cannot make is refused before any output buffer is allocated.
            end, bound = _walk(data, pos, hc_pos)
            if size > bound:
                raise CorruptDataError(
                    f"lz4 frame declares {size} bytes but its blocks make at most {bound}", pos)
            frame: Any = data[pos:end]
            if repair:
                frame = bytearray(frame)
                frame[hc_pos - pos] = header_checksum(bytes(data[pos:hc_pos]))
            # Without a declared size, the blocks' bound (what they can make at most) caps
            # drain's usual guess (8x the input): a Java-style frame of 64 KiB blocks is then
            # read in one call into a buffer about its size, not one of 8x its input.
            if size < 0 and bound:
                size = min(bound, max(8 * (end - pos), MIN_CHUNK))
            got, produced, rest = drain(
                lz4f.LZ4FrameDecompressor(), frame, max_size - total, max(size, 0),
                NAME, max_size, pos, (RuntimeError, ValueError),
            )
            chunks.extend(got)
            total += produced
            pos = end - len(rest)
        elif kind & 0xFFFFFFF0 == 0x184D2A50:
            if n - pos < 8:
                raise CorruptDataError("truncated lz4 skippable frame", pos)
            skip = int.from_bytes(data[pos + 4 : pos + 8], "little")
            if skip > n - pos - 8:
                raise CorruptDataError(f"lz4 skippable frame of {skip} bytes overruns the stream", pos)
            pos += 8 + skip
        else:
            raise CorruptDataError(f"bad lz4 frame magic 0x{kind:08x}", pos)
        if pos >= n:
            break
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)
