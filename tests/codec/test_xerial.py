"""snappy-java's xerial framing and raw snappy blocks, in both twins.

Golden streams are written by hand from the framing (16-byte header, then big-endian
length-prefixed raw snappy blocks) and from the raw snappy format (uvarint preamble,
literal and copy elements), not produced by the code under test.
"""

from __future__ import annotations

import array
import os
import struct
import sys
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcodec import _impl
from kcodec.errors import CorruptDataError, DecompressionLimitError, UnsupportedCodecError
from tests.conftest import NO_EXT

MAGIC = b"\x82SNAPPY\x00"
HEADER_BE = MAGIC + struct.pack(">ii", 1, 1)
HEADER_LE = MAGIC + struct.pack("<ii", 1, 1)

# Raw snappy blocks by hand:  preamble(len) element*
#   literal of n <= 60 bytes: tag (n-1)<<2, then the bytes
#   copy with 1-byte offset:  tag ((len-4)<<2) | 0b01 | (offset>>8)<<5, then offset & 0xff
HELLO = b"\x05\x10hello"  # "hello": preamble 5, literal of 5
HELLO2 = b"\x0a\x10hello\x05\x05"  # "hellohello": literal "hello", then copy len 5 offset 5
EMPTY_BLOCK = b"\x00"  # "": preamble 0 and nothing else


def chunk(block: bytes) -> bytes:
    return struct.pack(">i", len(block)) + block


def sample(n: int) -> bytes:
    """Half random, half repetitive, so blocks both compress and do not."""
    return (os.urandom(n // 2) + b"kafka record " * (n // 12 + 1))[:n]


SIZES = [0, 1, 5, 100, 32767, 32768, 32769, 65536, 100_000, (1 << 20) + 7]


@pytest.mark.parametrize("n", SIZES)
def test_round_trip(twin, n: int) -> None:
    x = twin("xerial")
    data = sample(n)
    blob = x.xerial_compress(data)
    assert blob[:16] == HEADER_BE
    assert x.is_xerial(blob)
    assert x.xerial_decompress(blob) == data
    assert x.snappy_decompress(blob) == data


def test_compress_writes_32k_blocks_like_snappy_java(twin) -> None:
    x = twin("xerial")
    data = sample(100_000)
    blob = x.xerial_compress(data)
    pos, sizes = 16, []
    while pos < len(blob):
        (length,) = struct.unpack_from(">i", blob, pos)
        block = blob[pos + 4 : pos + 4 + length]
        sizes.append(len(x.snappy_decompress(block)))
        pos += 4 + length
    assert sizes == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert x.XERIAL_BLOCK_SIZE == 32768


def test_compress_block_size(twin) -> None:
    x = twin("xerial")
    data = sample(1000)
    blob = x.xerial_compress(data, 100)
    assert x.xerial_decompress(blob) == data
    for bad in (0, -1, 1 << 31, 2.5, "8"):
        with pytest.raises(ValueError, match="block_size"):
            x.xerial_compress(data, bad)


def test_empty_input_is_one_empty_block(twin) -> None:
    x = twin("xerial")
    assert x.xerial_compress(b"") == HEADER_BE + chunk(EMPTY_BLOCK)
    assert x.xerial_decompress(HEADER_BE + chunk(EMPTY_BLOCK)) == b""
    assert x.xerial_decompress(HEADER_BE) == b""


GOLDEN = [
    (HEADER_BE + chunk(HELLO), b"hello"),
    (HEADER_LE + chunk(HELLO), b"hello"),  # version ints little-endian (seen in the wild)
    (MAGIC + b"\x00" * 8 + chunk(HELLO), b"hello"),  # any version ints: the magic decides
    (MAGIC + b"\xff" * 8 + chunk(HELLO2), b"hellohello"),
    (HEADER_BE + chunk(HELLO) + chunk(HELLO2), b"hellohellohello"),
    (HEADER_BE + chunk(b"") + chunk(HELLO) + chunk(b""), b"hello"),  # zero-length chunks
    (HEADER_BE + chunk(b"") * 5, b""),
    (HEADER_BE + chunk(EMPTY_BLOCK) + chunk(HELLO), b"hello"),
    (HEADER_BE, b""),
    (HELLO, b"hello"),  # no magic: one raw snappy block
    (HELLO2, b"hellohello"),
    (EMPTY_BLOCK, b""),
]


@pytest.mark.parametrize("blob,expected", GOLDEN)
def test_golden_streams(twin, blob: bytes, expected: bytes) -> None:
    x = twin("xerial")
    assert x.snappy_decompress(blob) == expected
    if blob.startswith(MAGIC):
        assert x.xerial_decompress(blob) == expected


BAD = [
    # (stream, message, offset)
    (HEADER_BE + b"\xff\xff\xff\xff", "negative xerial chunk length -1", 16),
    (HEADER_BE + struct.pack(">i", -(1 << 31)), "negative xerial chunk length -2147483648", 16),
    (HEADER_BE + b"\x00\x00\x00\x08" + HELLO, "xerial chunk length 8 overruns the stream: 7 bytes remain", 16),
    (HEADER_BE + b"\x7f\xff\xff\xff", "xerial chunk length 2147483647 overruns the stream: 0 bytes remain", 16),
    (HEADER_BE + b"\x00\x00", "truncated xerial chunk length: 2 of 4 bytes", 16),
    (HEADER_BE + chunk(HELLO) + b"\x00", "truncated xerial chunk length: 1 of 4 bytes", 27),
    (HEADER_BE[:12], "truncated xerial header: 12 of 16 bytes", 0),
    (HEADER_BE + chunk(HELLO[:-1]), "corrupt snappy block", 20),
    (HEADER_BE + chunk(b"\xe8\x07\x00"), "snappy block claims 1000 bytes from 3 compressed bytes", 20),
    (HEADER_BE + chunk(b"\x05\x05\x05"), "corrupt snappy block", 20),  # copy before any output
    (HEADER_BE + chunk(b"\x80"), "truncated snappy length preamble", 20),
    (HEADER_BE + chunk(b"\x80\x80\x80\x80\x80\x00"), "snappy length preamble longer than 5 bytes", 20),
    (HEADER_BE + chunk(b"\xff\xff\xff\xff\x7f"), "snappy length preamble overflows 32 bits", 20),
    (HEADER_BE + chunk(b"\x00\x00"), "snappy block claims 0 bytes from 2 compressed bytes", 20),
    (b"", "truncated snappy length preamble", 0),
    (b"\x05\x10hel", "corrupt snappy block", 0),
    (b"\x80\x80\x01\x00\x00\x00", "snappy block claims 16384 bytes from 6 compressed bytes", 0),
    (b"\x06\x10hello", "corrupt snappy block", 0),  # preamble says 6, the block makes 5
]


@pytest.mark.parametrize("blob,message,offset", BAD)
def test_corrupt_streams(twin, blob: bytes, message: str, offset: int) -> None:
    x = twin("xerial")
    with pytest.raises(CorruptDataError) as info:
        x.snappy_decompress(blob)
    assert str(info.value) == f"{message} at offset {offset}"
    assert info.value.offset == offset


def test_xerial_decompress_wants_the_magic(twin) -> None:
    x = twin("xerial")
    for blob in (HELLO, b"", MAGIC[:7]):
        with pytest.raises(CorruptDataError, match="bad magic"):
            x.xerial_decompress(blob)
        assert not x.is_xerial(blob)


def test_truncated_everywhere(twin) -> None:
    x = twin("xerial")
    blob = x.xerial_compress(sample(70_000))
    for cut in list(range(0, 40)) + list(range(len(blob) - 40, len(blob))):
        if cut in (0, 16):
            continue  # empty raw block / header alone are complete
        with pytest.raises(CorruptDataError):
            x.snappy_decompress(blob[:cut])


def test_limit(twin) -> None:
    x = twin("xerial")
    data = sample(100_000)
    blob = x.xerial_compress(data)
    assert x.snappy_decompress(blob, 100_000) == data
    with pytest.raises(DecompressionLimitError) as info:
        x.snappy_decompress(blob, 99_999)
    # 3 blocks of 32768 fit, the 4th (1696 bytes) does not: reported at that block.
    fourth = _chunk_offsets(blob)[3] + 4
    assert str(info.value) == f"snappy output would exceed the limit of 99999 bytes at offset {fourth}"
    raw = blob[20 : 20 + struct.unpack_from(">i", blob, 16)[0]]
    with pytest.raises(DecompressionLimitError):
        x.snappy_decompress(raw, 32767)
    assert x.snappy_decompress(raw, 32768) == data[:32768]
    assert x.snappy_decompress(EMPTY_BLOCK, 0) == b""
    with pytest.raises(ValueError, match="max_size"):
        x.snappy_decompress(blob, -1)
    with pytest.raises(ValueError, match="max_size"):
        x.snappy_decompress(blob, 1.5)
    assert x.snappy_decompress(blob, 1 << 80) == data


def _chunk_offsets(blob: bytes) -> list[int]:
    pos, out = 16, []
    while pos < len(blob):
        out.append(pos)
        pos += 4 + struct.unpack_from(">i", blob, pos)[0]
    return out


def test_bomb_fails_before_any_work(twin) -> None:
    """256 MiB of zeros in 8192 chunks: every preamble is read before anything is allocated."""
    x = twin("xerial")
    one = x.xerial_compress(bytes(32768))[16:]
    bomb = HEADER_BE + one * 8192
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError):
            x.snappy_decompress(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    # A raw block whose preamble claims 4 GiB - 1 from a few bytes.
    for limit in (100, 1 << 40):
        with pytest.raises((DecompressionLimitError, CorruptDataError)):
            x.snappy_decompress(b"\xff\xff\xff\xff\x0f\x00", limit)


def test_any_buffer(twin) -> None:
    x = twin("xerial")
    data = sample(5000)
    blob = x.xerial_compress(data)
    padded = b"XX" + blob + b"YY"
    for buf in (bytearray(blob), memoryview(padded)[2:-2], array.array("B", blob)):
        assert x.snappy_decompress(buf) == data
    words = array.array("I", data[:4000])
    assert x.snappy_decompress(x.xerial_compress(words)) == data[:4000]
    strided = memoryview(bytes(range(256)) * 4)[::2]
    assert x.snappy_decompress(x.xerial_compress(strided)) == bytes(strided)
    with pytest.raises(TypeError, match="bytes-like"):
        x.snappy_decompress("text")
    with pytest.raises(TypeError, match="bytes-like"):
        x.xerial_compress(12)


def test_missing_cramjam(twin, monkeypatch: pytest.MonkeyPatch) -> None:
    x = twin("xerial")
    blob = x.xerial_compress(b"hello")
    monkeypatch.setitem(sys.modules, "cramjam", None)
    for call in (lambda: x.xerial_compress(b"x"), lambda: x.snappy_decompress(blob)):
        with pytest.raises(UnsupportedCodecError, match="pip install cramjam"):
            call()


# Differential: both twins give the same value or the same exception class and message.


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the class and text are what we compare
        return (type(exc), str(exc))


def _pair():
    py = _impl.twin("xerial", "python")
    return (py if NO_EXT else _impl.twin("xerial", "cython")), py


def _same(name: str, *args) -> None:
    cy, py = _pair()
    a, b = _outcome(getattr(cy, name), *args), _outcome(getattr(py, name), *args)
    assert a == b
    if a[0] != "ok":
        assert issubclass(a[0], (CorruptDataError, DecompressionLimitError)), a


prefixes = st.sampled_from([b"", MAGIC, HEADER_BE, HEADER_LE, HEADER_BE + b"\x00\x00\x00"])


@given(prefix=prefixes, body=st.binary(max_size=200), limit=st.integers(0, 300))
def test_differential_random(prefix: bytes, body: bytes, limit: int) -> None:
    _same("snappy_decompress", prefix + body, limit)
    _same("xerial_decompress", prefix + body)
    _same("is_xerial", prefix + body)


@given(
    data=st.binary(max_size=3000),
    block=st.integers(1, 1000),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from("fdit")), max_size=4),
    limit=st.sampled_from([0, 10, 1000, 10**8]),
)
def test_differential_mutated(data: bytes, block: int, edits, limit: int) -> None:
    cy, py = _pair()
    blob = cy.xerial_compress(data, block)
    assert blob == py.xerial_compress(data, block)
    b = bytearray(blob)
    for pos, byte, kind in edits:
        pos %= len(b) + 1
        if kind == "f" and pos < len(b):
            b[pos] ^= byte or 1
        elif kind == "d" and pos < len(b):
            del b[pos]
        elif kind == "i":
            b.insert(pos, byte)
        else:
            del b[pos:]
    _same("snappy_decompress", bytes(b), limit)
