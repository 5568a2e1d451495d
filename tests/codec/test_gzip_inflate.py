"""gzip inflating with zlib-ng (the ``zlib-ng`` package) and with the standard library's zlib:
the same bytes for every stream, the same error for every bad one, and the fast one actually
in use where the dependency installs it."""

from __future__ import annotations

import os
import platform
import random
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from kcodec._codecs import gzip_codec
from kcodec.compression import decompress
from kcodec.errors import CorruptDataError, DecompressionLimitError

try:
    from zlib_ng import zlib_ng
except ImportError:  # Windows on Arm and PyPy: no wheel, kcodec inflates with zlib there
    zlib_ng = None

# Every differential test needs both; the test that zlib-ng is in use where it should be
# runs everywhere (a missing zlib-ng fails it rather than skipping this module).
needs_ng = pytest.mark.skipif(zlib_ng is None, reason="zlib-ng has no wheel for this platform")

_MAX = 1 << 20


def _decoder(module: Any) -> Callable[[bytes, int], bytes]:
    """gzip_codec.decompress with ``module`` as its inflater (the codec's globals swapped for
    the call only)."""
    errors = (module.error, zlib.error)

    def run(data: bytes, max_size: int = _MAX) -> bytes:
        saved = gzip_codec._inflate, gzip_codec._INFLATE_ERRORS
        gzip_codec._inflate, gzip_codec._INFLATE_ERRORS = module, errors
        try:
            return gzip_codec.decompress(memoryview(data), max_size, 2)
        finally:
            gzip_codec._inflate, gzip_codec._INFLATE_ERRORS = saved

    return run


WITH_ZLIB = _decoder(zlib)
WITH_NG = _decoder(zlib_ng) if zlib_ng is not None else WITH_ZLIB


def _outcome(fn: Callable[[bytes, int], bytes], data: bytes, max_size: int = _MAX) -> Any:
    try:
        return ("bytes", fn(data, max_size))
    except (CorruptDataError, DecompressionLimitError) as exc:
        return (type(exc).__name__, str(exc))


def _member(raw: bytes, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(raw) + c.flush()


def _with_header_fields(member: bytes, rng: random.Random) -> bytes:
    """The member with FEXTRA, FNAME, FCOMMENT and FHCRC set at random (what gzip(1) and
    other writers add; Java writes none)."""
    flg = 0
    extra = b""
    if rng.random() < 0.5:
        flg |= 4
        data = rng.randbytes(rng.randrange(8))
        extra += struct.pack("<H", len(data)) + data
    if rng.random() < 0.5:
        flg |= 8
        extra += b"name.bin\x00"
    if rng.random() < 0.5:
        flg |= 16
        extra += b"a comment\x00"
    head = member[:3] + bytes([flg]) + member[4:10] + extra
    if rng.random() < 0.5:
        head = head[:3] + bytes([flg | 2]) + head[4:]
        head += struct.pack("<H", zlib.crc32(head) & 0xFFFF)
    return head + member[10:]


def _corpus(rng: random.Random) -> list[bytes]:
    raws = [b"", b"k", b"kafka" * 2000, rng.randbytes(3000),
            bytes(rng.randrange(4) for _ in range(20000)),
            b"".join(b'{"id": %d, "tag": "%s"}' % (i, rng.randbytes(8).hex().encode())
                     for i in range(500))]
    out = []
    for raw in raws:
        for level in (1, 6, 9):
            m = _member(raw, level)
            out += [m, _with_header_fields(m, rng)]
    out.append(out[4] + out[7])                      # two members
    out.append(out[3] + bytes(7))                    # zero padding
    return out


@needs_ng
def test_valid_streams_inflate_to_the_same_bytes() -> None:
    rng = random.Random(7)
    for data in _corpus(rng):
        a, b = WITH_ZLIB(data, _MAX), WITH_NG(data, _MAX)
        assert a == b


@needs_ng
def test_mutated_streams_give_the_same_bytes_or_the_same_error() -> None:
    """Bit flips, overwritten bytes, cuts and insertions anywhere (header, deflate data,
    trailer): both inflaters give the same bytes, or both the same kcodec error (class,
    message and offset)."""
    rng = random.Random(11)
    corpus = _corpus(rng)
    seen = set()
    for _ in range(3000):
        g = bytearray(rng.choice(corpus))
        op = rng.randrange(4)
        if op == 0 and g:
            g[rng.randrange(len(g))] ^= 1 << rng.randrange(8)
        elif op == 1 and g:
            for _ in range(rng.randint(1, 3)):
                g[rng.randrange(len(g))] = rng.randrange(256)
        elif op == 2:
            del g[rng.randrange(len(g) + 1):]
        else:
            i = rng.randrange(len(g) + 1)
            g[i:i] = rng.randbytes(rng.randint(1, 3))
        data = bytes(g)
        want = _outcome(WITH_ZLIB, data)
        assert _outcome(WITH_NG, data) == want, data.hex()
        seen.add(want[0])
    assert {"bytes", "CorruptDataError"} <= seen     # both kinds of outcome were exercised


@needs_ng
def test_header_errors_are_the_same() -> None:
    """Reserved flag bits (RFC 1952: a reader must reject them), a method other than deflate,
    a wrong ID and a wrong header CRC, in the first member and in a later one."""
    good = _member(b"kafka" * 100, 6)
    h = bytearray(good[:10])
    h[3] |= 2
    bad_hcrc = bytes(h) + b"\x00\x00" + good[10:]
    bad = [good[:3] + bytes([good[3] | bit]) + good[4:] for bit in (0x20, 0x40, 0x80)]
    bad += [good[:2] + b"\x07" + good[3:], b"\x1f\x8c" + good[2:], bad_hcrc]
    for data in bad:
        for stream, offset in ((data, 0), (good + data, len(good))):
            want = _outcome(WITH_ZLIB, stream)
            assert want[0] == "CorruptDataError"
            assert want[1].startswith("corrupt gzip member") or "trailing bytes" in want[1]
            assert want[1].endswith(f"at offset {offset}")
            assert _outcome(WITH_NG, stream) == want


@needs_ng
def test_the_output_limit_holds_with_both() -> None:
    big = _member(bytes(4 << 20), 1)                 # ISIZE honest: caught before inflating
    lying = big[:-4] + struct.pack("<I", 100)        # ISIZE says 100 bytes: inflating stops
    for fn in (WITH_ZLIB, WITH_NG):
        for data in (big, lying):
            with pytest.raises(DecompressionLimitError):
                fn(data, 1 << 20)
        assert len(fn(big, 4 << 20)) == 4 << 20


def test_the_fast_inflater_is_the_one_in_use_where_it_installs() -> None:
    """pyproject installs zlib-ng on CPython everywhere but Windows on Arm; it must then be
    used (a silent fallback to zlib would hide a broken import), unless zlib was asked for."""
    if os.environ.get("KCODEC_GZIP_INFLATE", "").strip().lower() == "zlib":
        assert gzip_codec.INFLATER == "zlib"
        return
    if platform.python_implementation() == "CPython" and platform.machine() != "ARM64":
        assert gzip_codec.INFLATER == "zlib-ng"
        assert gzip_codec.library()[0] == "zlib + zlib-ng (inflate)"


@needs_ng
@pytest.mark.parametrize("value, want", [("zlib", "zlib"), (" ZLIB ", "zlib"), ("", "zlib-ng"),
                                         ("zlib-ng", "zlib-ng")])
def test_kcodec_gzip_inflate_selects_the_inflater(value: str, want: str) -> None:
    code = ("from kcodec._codecs import gzip_codec as g; "
            "from kcodec.compression import compress, decompress; "
            "assert decompress('gzip', compress('gzip', b'k' * 999)) == b'k' * 999; "
            "print(g.INFLATER, g.library()[0])")
    env = {**os.environ, "KCODEC_GZIP_INFLATE": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == want
    assert out[1] == "zlib"


def test_the_public_decompress_uses_the_codec() -> None:
    data = _member(b"kafka" * 3000, 6)
    assert decompress("gzip", data) == b"kafka" * 3000
