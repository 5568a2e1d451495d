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

Inflating uses zlib-ng (the ``zlib-ng`` package, a dependency wherever it has wheels) when it
is importable, ~1.5x faster than zlib on Kafka's level-6 batches, and the standard library's
zlib otherwise; ``KCODEC_GZIP_INFLATE=zlib`` (read at import) selects zlib. zlib-ng has
zlib's API and checks, so both give the same bytes for every stream and the same errors for
every bad one (tests/codec/test_gzip_inflate.py checks that differentially). Compressing is always
zlib's, whose levels and output are Kafka's (Java's GZIPOutputStream is zlib too).
"""

from __future__ import annotations

import os
import zlib
from typing import Any, cast

from kcodec.errors import CorruptDataError, DecompressionLimitError

NAME = "gzip"
PACKAGE = None  # the standard library's zlib; zlib-ng only speeds up inflating


def _pick_inflater() -> tuple[Any, str, tuple[type[BaseException], ...]]:
    """(module with zlib's decompressobj API, its name, the errors it raises)."""
    if os.environ.get("KCODEC_GZIP_INFLATE", "").strip().lower() != "zlib":
        try:
            from zlib_ng import zlib_ng
        except ImportError:
            pass
        else:
            # (zlib-ng's stubs declare ``error`` as an instance; it is the exception class)
            ng_error = cast("type[BaseException]", zlib_ng.error)
            return zlib_ng, "zlib-ng", (ng_error, zlib.error)
    return zlib, "zlib", (zlib.error,)


_inflate, INFLATER, _INFLATE_ERRORS = _pick_inflater()
LEVELS = range(1, 10)
EXTRA_LEVELS = (-1,)
DEFAULT_LEVEL = 6

_WBITS = 16 + zlib.MAX_WBITS  # gzip wrapper only
_FIRST_FEED = 1024  # input bytes given to zlib at first for each member, doubling up to
_MAX_FEED = 1 << 20


def library() -> tuple[str, str]:
    if INFLATER == "zlib-ng":
        return "zlib + zlib-ng (inflate)", f"{zlib.ZLIB_RUNTIME_VERSION} + {_inflate.ZLIBNG_VERSION}"
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
        d = _inflate.decompressobj(_WBITS)
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
            except _INFLATE_ERRORS as exc:
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
