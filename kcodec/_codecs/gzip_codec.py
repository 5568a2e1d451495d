"""gzip (codec 1): RFC 1952 members, as Java's GZIPOutputStream writes them.

    stream := member+ zero_padding*
    member := 1f 8b CM FLG MTIME:4 XFL OS [extra] [name] [comment] [hcrc]
              deflate_data CRC32:4le ISIZE:4le

Several members are read one after another (gzip(1) and Java read them all). Zero bytes
after the last member are padding and ignored, as gzip(1) and Python's gzip do; anything
else after a member must be another member, or it is a CorruptDataError.

Bounded: zlib's ``max_length`` stops each member one byte past the budget. Before that,
the last four bytes (ISIZE, the last member's size mod 2**32) are a cheap first check: a
member that says it is bigger than the budget is either too big or corrupt, so a plain
gzip bomb fails before any inflating.

Levels: Kafka's, 1..9 or -1 for zlib's default (6).
"""

from __future__ import annotations

import zlib

from kcodec.errors import CorruptDataError, DecompressionLimitError

NAME = "gzip"
PACKAGE = None  # the standard library's zlib
LEVELS = range(1, 10)
EXTRA_LEVELS = (-1,)
DEFAULT_LEVEL = 6

_WBITS = 16 + zlib.MAX_WBITS  # gzip wrapper only
_FIRST_FEED = 1024  # input bytes given to zlib at first for each member, doubling up to
_MAX_FEED = 1 << 20


def library() -> tuple[str, str]:
    return "zlib", zlib.ZLIB_RUNTIME_VERSION


def compress(data: memoryview, level: int, magic: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, _WBITS)
    return c.compress(data) + c.flush()


def decompress(data: memoryview, max_size: int, magic: int) -> bytes:
    n = len(data)
    if n == 0:
        raise CorruptDataError("empty gzip stream", 0)
    if n >= 18 and int.from_bytes(data[n - 4 :], "little") > max_size:
        raise DecompressionLimitError(NAME, max_size, n - 4)
    chunks = []
    total = 0
    pos = 0
    while True:
        start = pos
        d = zlib.decompressobj(_WBITS)
        # The first member gets the whole stream (one call, one output chunk: Kafka writes
        # one member). Later ones get growing pieces, not the whole rest: zlib copies the
        # input left after a member (unused_data), which made a stream of many small members
        # quadratic (800 KB of empty members took 7 s).
        feed = n if start == 0 else _FIRST_FEED
        while True:
            piece = data[pos : pos + feed]
            pos += len(piece)
            try:
                out = d.decompress(piece, max_size - total + 1)
            except zlib.error as exc:
                raise CorruptDataError(f"corrupt gzip member: {exc}", start) from exc
            total += len(out)
            if total > max_size:
                raise DecompressionLimitError(NAME, max_size, start)
            if out:
                chunks.append(out)
            if d.eof:
                break
            if pos >= n:
                raise CorruptDataError("truncated gzip member", start)
            feed = min(2 * feed, _MAX_FEED)
        pos -= len(d.unused_data)
        if pos >= n:
            break
        if data[pos : pos + 2] != b"\x1f\x8b":
            if not bytes(data[pos:]).strip(b"\x00"):
                break  # zero padding
            raise CorruptDataError("trailing bytes after gzip member", pos)
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)
