"""zstd (codec 4): Zstandard frames (RFC 8878), one or several, with or without a content size.

    stream   := (frame | skippable)+
    frame    := magic:4le(0xFD2FB528) FHD [window:1] [dict_id:0|1|2|4] [content_size:0|1|2|4|8]
                block+ [checksum:4le if FHD&0x04]
    FHD      := fcs_flag:2 single_segment:1 unused:1 reserved:1(0) checksum:1 dict_flag:2
    block    := header:3le(last:1 type:2 size:21) raw:byte[size] | rle:byte | compressed:byte[size]
    skippable:= magic:4le(0x184D2A50..5F) size:4le byte[size]

The stream is walked here first, header by header (no decompression): that finds each
frame's end, rejects truncated or malformed framing as CorruptDataError, and sums the
declared content sizes against the budget before any work. Then each frame goes to the
library: one exact allocation when its content size is known, bounded chunks when it is not
(Kafka's Java client, through zstd-jni's stream, writes no content size).

Libraries, in order: the standard library's ``compression.zstd`` (Python 3.14+), the
``zstandard`` package, ``backports.zstd``. Levels: Kafka's, -131072..22, default 3.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from kcodec._codecs._util import MAX_CHUNK, MIN_CHUNK, drain
from kcodec.errors import (
    CorruptDataError,
    DecompressionLimitError,
    KcodecError,
    UnsupportedCodecError,
)

NAME = "zstd"
PACKAGE = "zstandard"
LEVELS = range(-131072, 23)
EXTRA_LEVELS = ()
DEFAULT_LEVEL = 3

MAGIC = 0xFD2FB528
_MAX_BLOCK = 128 * 1024


class Frame:
    """One frame's place in the stream and what its header declares."""

    __slots__ = ("start", "end", "content_size", "skippable", "bound")

    def __init__(self, start: int, end: int, content_size: int, skippable: bool, bound: int) -> None:
        self.start, self.end, self.content_size, self.skippable = start, end, content_size, skippable
        self.bound = bound  # most bytes the blocks can produce (compressed ones: 128 KiB)


def _need(n: int, pos: int, count: int, what: str, frame: int) -> None:
    if n - pos < count:
        raise CorruptDataError(f"truncated zstd {what}", frame)


def scan(src: memoryview, max_size: int) -> list[Frame]:
    """Every frame of ``src`` (content_size -1 when not declared); framing errors raise, and
    so do declared sizes adding up past ``max_size`` (at once, before the blocks)."""
    n = len(src)
    declared = 0
    if n == 0:
        raise CorruptDataError("empty zstd stream", 0)
    frames = []
    pos = 0
    while pos < n:
        start = pos
        _need(n, pos, 4, "frame magic", start)
        magic = int.from_bytes(src[pos : pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:
            _need(n, pos, 8, "skippable frame", start)
            size = int.from_bytes(src[pos + 4 : pos + 8], "little")
            _need(n, pos + 8, size, "skippable frame", start)
            pos += 8 + size
            frames.append(Frame(start, pos, 0, True, 0))
            continue
        if magic != MAGIC:
            raise CorruptDataError(f"bad zstd frame magic 0x{magic:08x}", start)
        _need(n, pos, 5, "frame header", start)
        fhd = src[pos + 4]
        if fhd & 0x08:
            raise CorruptDataError("zstd frame header has its reserved bit set", start)
        single = fhd & 0x20
        fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
        dict_len = (0, 1, 2, 4)[fhd & 3]
        pos += 5 + (0 if single else 1) + dict_len
        _need(n, pos, fcs_len, "frame header", start)
        content_size = -1
        if fcs_len:
            content_size = int.from_bytes(src[pos : pos + fcs_len], "little")
            if fcs_len == 2:
                content_size += 256
            declared += content_size
            if declared > max_size:
                raise DecompressionLimitError(NAME, max_size, start)
        pos += fcs_len
        bound = 0
        while True:
            _need(n, pos, 3, "block header", start)
            header = int.from_bytes(src[pos : pos + 3], "little")
            kind, size = (header >> 1) & 3, header >> 3
            if kind == 3:
                raise CorruptDataError("zstd block of the reserved type", pos)
            if size > _MAX_BLOCK:
                raise CorruptDataError(f"zstd block of {size} bytes exceeds {_MAX_BLOCK}", pos)
            body = 1 if kind == 1 else size
            bound += _MAX_BLOCK if kind == 2 else size
            _need(n, pos + 3, body, "block", start)
            pos += 3 + body
            if header & 1:
                break
        if content_size > bound:
            # refused before the library allocates a buffer of the declared size
            raise CorruptDataError(
                f"zstd frame declares {content_size} bytes but its blocks make at most {bound}",
                start)
        if fhd & 0x04:
            _need(n, pos, 4, "frame checksum", start)
            pos += 4
        frames.append(Frame(start, pos, content_size, False, bound))
    return frames


class _Backend:
    """A zstd library behind one small interface."""

    name = ""
    errors: tuple[type[BaseException], ...] = ()

    def version(self) -> str:
        raise NotImplementedError

    def compress(self, data: memoryview, level: int) -> bytes:
        raise NotImplementedError

    def exact(self, frame: memoryview, size: int) -> bytes:
        """A frame that declares ``size`` (> 0, already within the budget)."""
        raise NotImplementedError

    def bounded(self, frame: memoryview, bound: int, budget: int, max_size: int,
                offset: int) -> list[bytes]:
        """A frame without a content size (its blocks make at most ``bound`` bytes), in
        chunks, at most ``budget`` bytes."""
        raise NotImplementedError

    def discard(self) -> None:
        """Forget any cached library state (after a failed call)."""


class StdlibBackend(_Backend):
    """``compression.zstd`` (Python 3.14+) or the same API from ``backports.zstd``."""

    def __init__(self, module: Any, name: str) -> None:
        self.mod = module
        self.name = name
        self.errors = (module.ZstdError, ValueError)

    def version(self) -> str:
        return f"libzstd {self.mod.zstd_version}"

    def compress(self, data: memoryview, level: int) -> bytes:
        return self.mod.compress(data, level)

    def exact(self, frame: memoryview, size: int) -> bytes:
        dec = self.mod.ZstdDecompressor()
        out = dec.decompress(frame, size + 1)
        if not dec.eof or len(out) != size:
            raise self.mod.ZstdError("frame content size mismatch")
        return out

    def bounded(self, frame: memoryview, bound: int, budget: int, max_size: int,
                offset: int) -> list[bytes]:
        chunks, _, rest = drain(
            self.mod.ZstdDecompressor(), frame, budget, min(bound, budget), NAME, max_size,
            offset, self.errors,
        )
        if rest:
            raise CorruptDataError("zstd frame ended early", offset)
        return chunks


class ZstandardBackend(_Backend):
    """The ``zstandard`` package; its contexts are kept per thread (they are not thread-safe)."""

    name = "zstandard"

    def __init__(self, module: Any) -> None:
        self.mod = module
        self.errors = (module.ZstdError, ValueError)
        self.local = threading.local()

    def version(self) -> str:
        return f"{self.mod.__version__} (libzstd {'.'.join(map(str, self.mod.ZSTD_VERSION))})"

    def _compressor(self, level: int) -> Any:
        cache = self.local.__dict__.setdefault("c", {})
        c = cache.get(level)
        if c is None:
            c = cache[level] = self.mod.ZstdCompressor(level=level)
        return c

    def _decompressor(self) -> Any:
        d = getattr(self.local, "d", None)
        if d is None:
            d = self.local.d = self.mod.ZstdDecompressor()
        return d

    def discard(self) -> None:
        self.local.__dict__.pop("d", None)

    def compress(self, data: memoryview, level: int) -> bytes:
        return self._compressor(level).compress(data)

    def exact(self, frame: memoryview, size: int) -> bytes:
        return self._decompressor().decompress(frame, allow_extra_data=False)

    def bounded(self, frame: memoryview, bound: int, budget: int, max_size: int,
                offset: int) -> list[bytes]:
        if bound <= budget and bound <= 64 * len(frame) + (1 << 20):
            # The blocks cannot make more than ``bound``: one call into a buffer that size.
            out = self._decompressor().decompress(
                frame, max_output_size=max(bound, 1), allow_extra_data=False
            )
            return [out] if out else []
        reader = self._decompressor().stream_reader(frame, read_across_frames=False)
        chunks: list[bytes] = []
        produced = 0
        size = MIN_CHUNK
        while True:
            out = reader.read(min(budget - produced + 1, size))
            if not out:
                return chunks
            chunks.append(out)
            produced += len(out)
            if produced > budget:
                raise DecompressionLimitError(NAME, max_size, offset)
            size = min(MAX_CHUNK, size * 2)


_CANDIDATES = ("compression.zstd", "zstandard", "backports.zstd")
_backend: _Backend | None = None


def make_backend(name: str) -> _Backend:
    """The backend for module ``name`` (ImportError if it is not installed)."""
    module = importlib.import_module(name)
    if name == "zstandard":
        return ZstandardBackend(module)
    return StdlibBackend(module, name)


def backend() -> _Backend:
    global _backend
    if _backend is None:
        for name in _CANDIDATES:
            try:
                _backend = make_backend(name)
                break
            except ImportError:
                continue
        else:
            raise UnsupportedCodecError(NAME, PACKAGE)
    return _backend


def library() -> tuple[str, str]:
    b = backend()
    return b.name, b.version()


def compress(data: memoryview, level: int, magic: int) -> bytes:
    return backend().compress(data, level)


def _decode_frame(b: _Backend, frame: memoryview, f: Frame, max_size: int, total: int
                  ) -> list[bytes]:
    """The output of one (non-skippable) frame, ``total`` bytes already produced."""
    if f.content_size > 0:
        if f.content_size > max_size - total:
            raise DecompressionLimitError(NAME, max_size, f.start)
        out = b.exact(frame, f.content_size)
        if len(out) != f.content_size:
            raise CorruptDataError("zstd frame content size mismatch", f.start)
        return [out]
    # A declared size of 0 is decoded the streaming way (zstandard's one-shot call would
    # return b"" without reading the blocks).
    bound = f.bound if f.content_size < 0 else max_size + 1
    got = b.bounded(frame, bound, max_size - total, max_size, f.start)
    if f.content_size == 0 and got:
        raise CorruptDataError("zstd frame content size mismatch", f.start)
    return got


def decompress(data: memoryview, max_size: int, magic: int) -> bytes:
    b = backend()
    frames = scan(data, max_size)
    chunks: list[bytes] = []
    total = 0
    for f in frames:
        if f.skippable:
            continue
        frame = data[f.start : f.end]
        try:
            try:
                got = _decode_frame(b, frame, f, max_size, total)
            except b.errors:
                # A cached library context carries state from earlier calls (even successful
                # ones), and what it says about a bad frame then depends on them: the twins
                # disagreed. Bad frames are rare: decide again with a fresh context.
                b.discard()
                got = _decode_frame(b, frame, f, max_size, total)
        except BaseException as exc:
            b.discard()   # the context may be mid-frame
            if isinstance(exc, KcodecError) or not isinstance(exc, b.errors):
                raise
            raise CorruptDataError(f"corrupt zstd frame: {exc}", f.start) from exc
        chunks.extend(got)
        total += sum(map(len, got))
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)
