"""The compression registry: every codec and level, framings, limits and bad input."""

from __future__ import annotations

import array
import gzip
import importlib
import os
import struct
import sys
import time
import tracemalloc
import zlib

import lz4.frame
import pytest

from kcodec._codecs import gzip_codec, lz4_codec, zstd_codec
from kcodec._codecs.xxhash32 import xxh32
from kcodec.compression import (
    DEFAULT_LEVELS,
    DEFAULT_MAX_SIZE,
    LEVEL_RANGES,
    Codec,
    codec_info,
    codec_of,
    compress,
    decompress,
)
from kcodec.errors import (
    ChecksumError,
    CorruptDataError,
    DecodeError,
    DecompressionLimitError,
    EncodeError,
    UnsupportedCodecError,
)

SIZES = [0, 1, 1000, 65537, (1 << 20) + 7]
_CACHE: dict[int, bytes] = {}


def sample(n: int) -> bytes:
    """Half random, half repetitive; the same bytes for one size within a run."""
    if n not in _CACHE:
        _CACHE[n] = (os.urandom(n // 2) + b"kafka record " * (n // 12 + 1))[:n]
    return _CACHE[n]


def _zstd_lib():
    """The library that writes test frames: zstandard, else one with 3.14's stdlib API."""
    for name in ("zstandard", "compression.zstd", "backports.zstd"):
        try:
            return name, importlib.import_module(name)
        except ImportError:
            continue
    raise RuntimeError("no zstd library installed")


def zframe(data: bytes, *, content_size: bool = True, checksum: bool = False, level: int = 3,
           split: int = 0) -> bytes:
    """One zstd frame of ``data``; ``split`` > 0 flushes a block after that many bytes."""
    name, m = _zstd_lib()
    if name == "zstandard":
        c = m.ZstdCompressor(level=level, write_content_size=content_size, write_checksum=checksum)
        if not split:
            return c.compress(data)
        obj = c.compressobj(size=len(data) if content_size else -1)
        return (obj.compress(data[:split]) + obj.flush(m.COMPRESSOBJ_FLUSH_BLOCK)
                + obj.compress(data[split:]) + obj.flush())
    p = m.CompressionParameter
    c = m.ZstdCompressor(options={p.compression_level: level, p.checksum_flag: int(checksum)})
    if content_size:
        c.set_pledged_input_size(len(data))
    return (c.compress(data[:split], mode=c.FLUSH_BLOCK) if split else b"") + c.compress(
        data[split:]) + c.flush()


def zdecompress(frame: bytes) -> bytes:
    name, m = _zstd_lib()
    if name == "zstandard":
        return m.ZstdDecompressor().stream_reader(frame, read_across_frames=True).read()
    return m.decompress(frame)


def has_content_size(frame: bytes) -> bool:
    return bool(frame[4] >> 6 or frame[4] & 0x20)


def _levels():
    """(codec, level, size): every level of gzip and lz4, a spread of zstd's, every size;
    zstd's slowest levels (16+) on > 1 MiB only in the slow run (test_round_trip_slow_levels)."""
    levels = [("gzip", lv) for lv in [-1, *range(1, 10)]]
    levels += [("lz4", lv) for lv in range(1, 18)]
    levels += [("zstd", lv) for lv in [-131072, -1000, -5, -1, 1, 2, 3, 5, 9, 12, 15, 16, 19, 22]]
    return [
        (codec, lv, n)
        for codec, lv in levels
        for n in SIZES
        if not (codec == "zstd" and lv >= 16 and n > 100_000)
    ]


@pytest.mark.parametrize("codec,level,n", _levels())
def test_round_trip_every_level(codec: str, level: int, n: int) -> None:
    data = sample(n)
    for magic in (0, 2):
        blob = compress(codec, data, level, magic=magic)
        assert decompress(codec, blob, magic=magic) == data


@pytest.mark.slow
@pytest.mark.parametrize("level", [16, 19, 22])
def test_round_trip_slow_levels(level: int) -> None:
    data = sample(SIZES[-1])
    assert decompress("zstd", compress("zstd", data, level)) == data


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("n", SIZES)
def test_round_trip_defaults(codec: Codec, n: int) -> None:
    data = sample(n)
    for magic in (0, 1, 2):
        for spelled in (codec, int(codec), codec.name.lower(), codec.name):
            blob = compress(spelled, data, magic=magic)
            assert decompress(spelled, blob, magic=magic) == data


def test_codec_ids_and_names() -> None:
    assert [(c.name, int(c)) for c in Codec] == [
        ("NONE", 0), ("GZIP", 1), ("SNAPPY", 2), ("LZ4", 3), ("ZSTD", 4)
    ]
    assert codec_of(" Zstd ") is Codec.ZSTD
    assert codec_of(3) is Codec.LZ4
    for bad in (5, 6, 7, -1, "brotli", "", None, 2.0, True, b"gzip"):
        with pytest.raises(UnsupportedCodecError):
            codec_of(bad)
        with pytest.raises(UnsupportedCodecError):
            decompress(bad, b"")
        with pytest.raises(UnsupportedCodecError):
            compress(bad, b"")
    with pytest.raises(UnsupportedCodecError, match="unknown compression codec 5"):
        decompress(5, b"")


def test_levels() -> None:
    assert DEFAULT_LEVELS == {
        Codec.NONE: None, Codec.GZIP: 6, Codec.SNAPPY: None, Codec.LZ4: 9, Codec.ZSTD: 3
    }
    assert LEVEL_RANGES[Codec.GZIP] == range(1, 10)
    assert LEVEL_RANGES[Codec.LZ4] == range(1, 18)
    assert LEVEL_RANGES[Codec.ZSTD] == range(-131072, 23)
    bad = [("gzip", 0), ("gzip", 10), ("gzip", -2), ("lz4", 0), ("lz4", 18), ("zstd", 23),
           ("zstd", -131073), ("snappy", 1), ("none", 1), ("gzip", 5.0), ("zstd", True)]
    for codec, level in bad:
        with pytest.raises(EncodeError):
            compress(codec, b"x", level)
    # gzip -1 is zlib's default, 6, as in Kafka and Java's Deflater.
    assert compress("gzip", sample(5000), -1) == compress("gzip", sample(5000), 6)


def test_gzip_levels_reach_zlib() -> None:
    data = sample(200_000)
    blobs = {lv: compress("gzip", data, lv) for lv in (1, 9)}
    assert len(blobs[9]) < len(blobs[1])
    assert zlib.decompress(blobs[1], 31) == data


def test_lz4_default_level_is_the_fast_compressor() -> None:
    """Kafka's Java client uses LZ4's fast compressor for its default level 9."""
    data = sample(300_000)
    fast = lz4.frame.compress(data, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                              block_linked=False)
    assert compress("lz4", data) == fast
    assert compress("lz4", data, 9) != compress("lz4", data, 10)


def test_magic_and_max_size_arguments() -> None:
    for bad in (3, -1, "2", None, True):
        with pytest.raises(ValueError, match="magic"):
            compress("gzip", b"", magic=bad)
        with pytest.raises(ValueError, match="magic"):
            decompress("gzip", b"", magic=bad)
    for bad in (-1, 1.0, "10", None):
        with pytest.raises(ValueError, match="max_size"):
            decompress("none", b"", bad)
    assert DEFAULT_MAX_SIZE == 100 * 1024 * 1024


def test_any_buffer() -> None:
    import numpy as np

    data = sample(10_000)
    for codec in Codec:
        blob = compress(codec, data)
        padded = b"!" + blob + b"?"
        for buf in (bytearray(blob), memoryview(padded)[1:-1], array.array("B", blob),
                    np.frombuffer(blob, dtype=np.uint8)):
            assert decompress(codec, buf) == data
        for src in (bytearray(data), memoryview(data), array.array("I", data[:8000]),
                    np.frombuffer(data[:8000], dtype=np.int64), memoryview(data)[::3]):
            expected = bytes(memoryview(src).cast("B")) if memoryview(src).c_contiguous else bytes(src)
            assert decompress(codec, compress(codec, src)) == expected
        with pytest.raises(TypeError, match="bytes-like"):
            compress(codec, "text")


# gzip


def test_gzip_multi_member() -> None:
    a, b = sample(70_000), b"second member"
    stream = compress("gzip", a) + gzip.compress(b) + compress("gzip", b"")
    assert decompress("gzip", stream) == a + b
    assert decompress("gzip", stream + b"\x00" * 10) == a + b  # zero padding, as gzip(1)
    named = _gzip_with_name(b"hello")
    assert decompress("gzip", named + named) == b"hellohello"


def _gzip_with_name(data: bytes) -> bytes:
    import io

    buf = io.BytesIO()
    with gzip.GzipFile(filename="records.bin", mode="wb", fileobj=buf, mtime=1) as f:
        f.write(data)
    return buf.getvalue()


def test_gzip_bad() -> None:
    good = compress("gzip", sample(5000))
    cases = {
        b"": "empty gzip stream at offset 0",
        good[:10]: "truncated gzip member at offset 0",
        good[:-1]: "truncated gzip member at offset 0",
        good + b"junk": f"trailing bytes after gzip member at offset {len(good)}",
        good + b"\x1f\x8b": "truncated gzip member at offset " + str(len(good)),
    }
    for blob, message in cases.items():
        with pytest.raises(CorruptDataError) as info:
            decompress("gzip", blob, 1 << 40)
        assert str(info.value) == message
    # The last 4 bytes are the last member's ISIZE: a stream whose trailer claims more than
    # the limit is refused up front (too big, or corrupt: either way not decoded).
    with pytest.raises(DecompressionLimitError) as limit:
        decompress("gzip", good + b"junk")
    assert limit.value.offset == len(good)
    flipped = bytearray(good)
    flipped[-8] ^= 1  # the CRC32 of the member
    with pytest.raises(CorruptDataError, match="corrupt gzip member"):
        decompress("gzip", bytes(flipped))
    with pytest.raises(CorruptDataError, match="corrupt gzip member"):
        decompress("gzip", b"\x1f\x8b\x09" + good[3:], 1 << 40)
    with pytest.raises(CorruptDataError):
        decompress("gzip", zlib.compress(b"zlib, not gzip"), 1 << 40)


# lz4


def _legacy_hc(frame: bytes, hc_pos: int) -> int:
    return (xxh32(frame[:hc_pos]) >> 8) & 0xFF


def _correct_hc(frame: bytes, hc_pos: int) -> int:
    return (xxh32(frame[4:hc_pos]) >> 8) & 0xFF


def test_lz4_legacy_framing_for_magic_0() -> None:
    data = sample(100_000)
    old = compress("lz4", data, magic=0)
    new = compress("lz4", data, magic=1)
    assert compress("lz4", data, magic=2) == new
    # Both: version 1, independent blocks, no checksums; 64 KiB blocks.
    assert old[4] == 0x60 and old[5] == 0x40
    assert new[4] == 0x68 and new[5] == 0x40  # magic 1/2 also carry the content size
    assert struct.unpack_from("<Q", new, 6)[0] == len(data)
    assert old[6] == _legacy_hc(old, 6) != _correct_hc(old, 6)
    assert new[14] == _correct_hc(new, 14)
    assert lz4.frame.decompress(new) == data
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(old)  # a standard reader rejects the legacy HC
    for magic in (0, 1, 2):  # reading tolerates both
        assert decompress("lz4", old, magic=magic) == data
        assert decompress("lz4", new, magic=magic) == data


def test_lz4_header_checksum_rules() -> None:
    data = sample(5000)
    frame = bytearray(compress("lz4", data))
    wrong = {_correct_hc(bytes(frame), 14), _legacy_hc(bytes(frame), 14)}
    bad = next(b for b in range(256) if b not in wrong)
    frame[14] = bad
    assert decompress("lz4", bytes(frame), magic=0) == data  # Kafka ignores HC for magic 0
    for magic in (1, 2):
        with pytest.raises(ChecksumError) as info:
            decompress("lz4", bytes(frame), magic=magic)
        assert info.value.expected == bad and info.value.offset == 14


@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize("block_checksum", [False, True])
@pytest.mark.parametrize("content_checksum", [False, True])
@pytest.mark.parametrize("block_linked", [False, True])
def test_lz4_frame_variants(store_size, block_checksum, content_checksum, block_linked) -> None:
    data = sample(300_000)
    for block_size in (lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB):
        blob = lz4.frame.compress(
            data, store_size=store_size, block_checksum=block_checksum,
            content_checksum=content_checksum, block_linked=block_linked, block_size=block_size,
        )
        assert decompress("lz4", blob) == data
        assert decompress("lz4", blob, len(data)) == data
        with pytest.raises(DecompressionLimitError):
            decompress("lz4", blob, len(data) - 1)


def test_lz4_checksums_are_checked() -> None:
    data = sample(50_000)
    for kw in ({"block_checksum": True}, {"content_checksum": True}):
        blob = bytearray(lz4.frame.compress(data, **kw))
        blob[-2] ^= 0x40
        with pytest.raises(CorruptDataError, match="corrupt lz4 frame"):
            decompress("lz4", bytes(blob))


def test_lz4_concatenated_and_skippable_frames() -> None:
    a, b = sample(1000), b"second frame"
    skippable = struct.pack("<II", 0x184D2A5F, 3) + b"abc"
    stream = compress("lz4", a) + skippable + compress("lz4", b, magic=0)
    assert decompress("lz4", stream) == a + b
    assert decompress("lz4", skippable) == b""


def test_lz4_bad() -> None:
    good = compress("lz4", sample(5000))
    cases = [
        (b"", "truncated lz4 frame header: 0 bytes at offset 0"),
        (good[:5], "truncated lz4 frame header: 5 bytes at offset 0"),
        (good[:14], "truncated lz4 frame header: 14 bytes at offset 0"),
        (good + b"jun", f"truncated lz4 frame header: 3 bytes at offset {len(good)}"),
        (good + b"junk", f"bad lz4 frame magic 0x6b6e756a at offset {len(good)}"),
        (b"\x04\x22\x4d\x18\xa0\x40\x00", "unsupported lz4 frame version 2 at offset 0"),
        (struct.pack("<II", 0x184D2A50, 10) + b"abc", "lz4 skippable frame of 10 bytes overruns the stream at offset 0"),
    ]
    for blob, message in cases:
        with pytest.raises(CorruptDataError) as info:
            decompress("lz4", blob)
        assert str(info.value) == message
    for cut in (20, len(good) - 4, len(good) - 1):
        with pytest.raises(CorruptDataError, match="lz4 frame"):
            decompress("lz4", good[:cut])
    broken = bytearray(good)
    broken[30:40] = b"\xff" * 10
    with pytest.raises(CorruptDataError):
        decompress("lz4", bytes(broken))


# zstd


def test_zstd_without_content_size_and_multi_frame() -> None:
    a, b = sample(300_000), sample(1000)
    fa, fb = zframe(a, content_size=False, checksum=True), zframe(b)
    assert not has_content_size(fa) and has_content_size(fb)
    skippable = struct.pack("<II", 0x184D2A53, 4) + b"skip"
    assert decompress("zstd", fa) == a
    assert decompress("zstd", fa + fb + skippable + fa) == a + b + a
    assert decompress("zstd", skippable) == b""
    # A streamed frame (as zstd-jni's ZstdOutputStream writes) in several blocks.
    streamed = zframe(a + b, content_size=False, level=1, split=len(a))
    assert not has_content_size(streamed)
    assert decompress("zstd", streamed) == a + b
    assert decompress("zstd", zframe(b"")) == b""
    assert decompress("zstd", zframe(b"", content_size=False)) == b""


def test_zstd_limits() -> None:
    data = sample(300_000)
    for content_size in (False, True):
        frame = zframe(data, content_size=content_size)
        assert decompress("zstd", frame + frame, 2 * len(data)) == data + data
        with pytest.raises(DecompressionLimitError):
            decompress("zstd", frame + frame, 2 * len(data) - 1)
        with pytest.raises(DecompressionLimitError):
            decompress("zstd", frame, len(data) - 1)


def test_zstd_bad() -> None:
    data = sample(50_000)
    good = zframe(data, checksum=True)
    cases = [
        (b"", "empty zstd stream at offset 0"),
        (good[:3], "truncated zstd frame magic at offset 0"),
        (good[:5], "truncated zstd frame header at offset 0"),
        (good[:-2], "truncated zstd frame checksum at offset 0"),
        (good + b"\x00", f"truncated zstd frame magic at offset {len(good)}"),
        (good + b"junk", f"bad zstd frame magic 0x6b6e756a at offset {len(good)}"),
        (b"\x28\xb5\x2f\xfd\x08", "zstd frame header has its reserved bit set at offset 0"),
        (b"\x28\xb5\x2f\xfd\x20\x00\x07\x00\x00", "zstd block of the reserved type at offset 6"),
        (b"\x28\xb5\x2f\xfd\x20\x00" + (((1 << 17) + 1) << 3 | 1).to_bytes(3, "little"),
         "zstd block of 131073 bytes exceeds 131072 at offset 6"),
        (struct.pack("<II", 0x184D2A50, 10), "truncated zstd skippable frame at offset 0"),
    ]
    for blob, message in cases:
        with pytest.raises(CorruptDataError) as info:
            decompress("zstd", blob)
        assert str(info.value) == message
    for cut in range(6, len(good), max(1, len(good) // 20)):
        with pytest.raises(CorruptDataError):
            decompress("zstd", good[:cut])
    broken = bytearray(good)
    broken[-1] ^= 0xFF  # content checksum
    with pytest.raises(CorruptDataError, match="corrupt zstd frame"):
        decompress("zstd", bytes(broken))
    # A content size that lies, both ways (a 2-byte field holds the size - 256).
    single = bytearray(zframe(b"x" * 300))
    assert single[4] & 0x20 and single[4] >> 6 == 1  # single segment, 2-byte size after FHD
    for lie in (256, 299, 301, 1000):
        forged = bytearray(single)
        forged[5:7] = (lie - 256).to_bytes(2, "little")
        with pytest.raises(CorruptDataError):
            decompress("zstd", bytes(forged))


_ON_314 = sys.version_info >= (3, 14)


@pytest.fixture(params=[
    # zstandard: the runtime dependency before 3.14, test-only after.
    pytest.param("zstandard", marks=[pytest.mark.peers] if _ON_314 else []),
    "compression.zstd" if _ON_314 else pytest.param("backports.zstd", marks=pytest.mark.peers),
])
def zstd_backend(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with each zstd library: backports.zstd has the API of 3.14's compression.zstd."""
    backend = zstd_codec.make_backend(request.param)
    monkeypatch.setattr(zstd_codec, "_backend", backend)
    return request.param


def test_zstd_each_backend(zstd_backend: str) -> None:
    assert codec_info()[4]["library"] == zstd_backend
    data = sample(300_000)
    for level in (-5, 1, 3, 19):
        blob = compress("zstd", data, level)
        assert decompress("zstd", blob) == data
    no_size = zframe(data, content_size=False, checksum=True)
    assert decompress("zstd", no_size + no_size) == data + data
    with pytest.raises(DecompressionLimitError):
        decompress("zstd", no_size, len(data) - 1)
    broken = bytearray(no_size)
    broken[len(broken) // 2 : len(broken) // 2 + 20] = bytes(20)
    with pytest.raises(CorruptDataError):
        decompress("zstd", bytes(broken))
    assert decompress("zstd", compress("zstd", b"")) == b""


# Bombs: 1 GiB of zeros in each codec fails fast and with little memory. They are built
# from repeated pieces (cheap to make): blocks made after a full flush / independent blocks /
# RLE blocks written from the zstd format are identical, so one can be repeated.

_MIB = 1 << 20


def _gzip_zeros(mib: int, crc: bool = True) -> bytes:
    """One gzip member of ``mib`` MiB of zeros (CRC left wrong when ``crc`` is False: the
    limit stops decoding long before the trailer)."""
    zeros = bytes(_MIB)
    obj = zlib.compressobj(1, zlib.DEFLATED, 31)
    first = obj.compress(zeros) + obj.flush(zlib.Z_FULL_FLUSH)  # 10-byte header + a block
    body = first[10:]
    value = 0
    if crc:
        for _ in range(mib):
            value = zlib.crc32(zeros, value)
    deflate_end = obj.flush()[:-8]
    return first[:10] + body * mib + deflate_end + struct.pack("<II", value, (mib * _MIB) & 0xFFFFFFFF)


def _lz4_zeros(store_size: bool) -> bytes:
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False)
    header = c.begin(source_size=(1 << 30) if store_size else 0)
    block = c.compress(bytes(4 * _MIB))
    assert block == c.compress(bytes(4 * _MIB))
    return header + block * 256 + bytes(4)  # the end mark


def _zstd_zeros(store_size: bool) -> bytes:
    """By hand from RFC 8878: a frame of 8192 RLE blocks of 128 KiB of zeros."""
    fhd = (3 << 6) if store_size else 0  # 8-byte content size, or none; window descriptor
    header = struct.pack("<IBB", 0xFD2FB528, fhd, (17 - 10) << 3)  # window 128 KiB
    if store_size:
        header += struct.pack("<Q", 1 << 30)
    rle = (((128 * 1024) << 3) | (1 << 1)).to_bytes(3, "little") + b"\x00"
    last = ((((128 * 1024) << 3) | (1 << 1)) | 1).to_bytes(3, "little") + b"\x00"
    return header + rle * 8191 + last


def _snappy_zeros() -> bytes:
    one = compress("snappy", bytes(32768))[16:]
    return compress("snappy", b"")[:16] + one * 32768


BOMBS = {
    "gzip-one-member": ("gzip", lambda: _gzip_zeros(1024, crc=False)),
    "gzip-one-member-padded": ("gzip", lambda: _gzip_zeros(1024, crc=False) + bytes(8)),
    "gzip-64-members": ("gzip", lambda: _gzip_zeros(16) * 64),
    "lz4-sized": ("lz4", lambda: _lz4_zeros(True)),
    "lz4-unsized": ("lz4", lambda: _lz4_zeros(False)),
    "zstd-sized": ("zstd", lambda: _zstd_zeros(True)),
    "zstd-unsized": ("zstd", lambda: _zstd_zeros(False)),
    "snappy-xerial": ("snappy", _snappy_zeros),
}


def test_bomb_builders_make_valid_streams() -> None:
    """The same builders at a small scale decode to the zeros they claim."""
    assert decompress("gzip", _gzip_zeros(3) * 2) == bytes(6 * _MIB)
    assert zlib.decompress(_gzip_zeros(2), 31) == bytes(2 * _MIB)
    frame = struct.pack("<IBB", 0xFD2FB528, 0, 7 << 3) + (((1000 << 3) | 3).to_bytes(3, "little") + b"\x00")
    assert decompress("zstd", frame) == bytes(1000)
    assert zdecompress(frame) == bytes(1000)


@pytest.mark.parametrize("name", list(BOMBS))
def test_bombs(name: str) -> None:
    codec, make = BOMBS[name]
    bomb = make()
    assert len(bomb) < 64 << 20
    limit = 8 << 20
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(DecompressionLimitError) as info:
            decompress(codec, bomb, limit)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.limit == limit
    assert peak < 3 * limit, f"{peak >> 20} MiB"
    assert elapsed < 5
    # With the default limit, the 1 GiB output is refused too.
    with pytest.raises(DecompressionLimitError):
        decompress(codec, bomb)


def test_none_codec_limit() -> None:
    assert decompress("none", b"abc", 3) == b"abc"
    with pytest.raises(DecompressionLimitError):
        decompress("none", b"abcd", 3)


# Missing libraries name their pip package.


def test_missing_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cramjam", None)
    monkeypatch.setitem(sys.modules, "lz4", None)
    monkeypatch.setitem(sys.modules, "lz4.frame", None)
    monkeypatch.setattr(lz4_codec, "_lz4", None)
    for name in zstd_codec._CANDIDATES:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(zstd_codec, "_backend", None)
    for codec, package in (("snappy", "cramjam"), ("lz4", "lz4"), ("zstd", "zstandard")):
        for fn, blob in ((compress, b"x"), (decompress, b"xxxxxxxxxxxxxxxx")):
            with pytest.raises(UnsupportedCodecError) as info:
                fn(codec, blob)
            assert info.value.package == package
            assert f"pip install {package}" in str(info.value)
    available = {row["name"]: row["available"] for row in codec_info()}
    assert available == {"none": True, "gzip": True, "snappy": False, "lz4": False, "zstd": False}
    assert decompress("gzip", compress("gzip", b"still fine")) == b"still fine"


def test_codec_info() -> None:
    rows = codec_info()
    assert [r["name"] for r in rows] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4]
    assert all(r["available"] for r in rows)
    gzip_library = "zlib + zlib-ng (inflate)" if gzip_codec.INFLATER == "zlib-ng" else "zlib"
    assert rows[1]["library"] == gzip_library and rows[2]["library"] == "cramjam"
    assert rows[3]["library"] == "lz4" and rows[4]["library"] in zstd_codec._CANDIDATES
    assert [r["default_level"] for r in rows] == [None, 6, None, 9, 3]
    assert all(r["version"] for r in rows[1:])


# Library errors never leak: random and mutated input gives bytes or a DecodeError.


def test_no_library_error_leaks_on_garbage() -> None:
    import random

    rng = random.Random(1234)
    seeds = {c: compress(c, sample(3000)) for c in Codec}
    for _ in range(300):
        for codec, good in seeds.items():
            blob = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                op = rng.random()
                pos = rng.randrange(len(blob) + 1)
                if op < 0.5 and pos < len(blob):
                    blob[pos] = rng.randrange(256)
                elif op < 0.75:
                    del blob[pos:]
                else:
                    blob[pos:pos] = os.urandom(rng.randint(1, 8))
            for magic in (0, 2):
                try:
                    out = decompress(codec, bytes(blob), 1 << 20, magic=magic)
                except DecodeError:
                    continue
                assert isinstance(out, bytes)
