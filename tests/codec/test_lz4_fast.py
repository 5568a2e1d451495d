"""The compiled twin's lz4 fast path (kcodec/_cy/_lz4): plain Kafka-style frames decoded from
C, everything else left to the general path. Whenever the fast path answers, the general
path (the pure twin's) gives the same bytes; for anything it leaves, compression.decompress
gives the general path's result or error. Frames of every shape lz4.frame writes, kcodec's
own for magic 0/1/2, and random corruptions of them."""

from __future__ import annotations

import random

import pytest

from kcodec import compression
from kcodec._codecs import lz4_codec
from kcodec.errors import DecompressionLimitError
from tests.conftest import NO_EXT

lz4frame = pytest.importorskip("lz4.frame")
pytestmark = pytest.mark.skipif(NO_EXT, reason="the fast path is the compiled twin's")

LIMIT = 1 << 26


def _fast():
    from kcodec._cy import _lz4
    return _lz4


def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", bytes(fn(*args, **kwargs)))
    except Exception as exc:  # noqa: BLE001 - compared below
        return ("error", type(exc), str(exc))


def _payload(rng: random.Random, n: int) -> bytes:
    kind = rng.randrange(3)
    if kind == 0:
        return rng.randbytes(n)
    if kind == 1:
        return (b"kafka record %d " * (n // 16 + 1))[:n]
    return bytes(rng.choice(b"ab") for _ in range(n))


def _frames(rng: random.Random) -> list[tuple[bytes, bool]]:
    """(frame, whether the fast path must take it)."""
    out = []
    for size in (0, 1, 100, 70_000, 300_000):
        data = _payload(rng, size)
        for block_size, linked, size_flag, c_sum, b_sum in [
            (lz4frame.BLOCKSIZE_MAX64KB, False, True, False, False),
            (lz4frame.BLOCKSIZE_MAX64KB, False, False, False, False),
            (lz4frame.BLOCKSIZE_MAX256KB, False, True, False, False),
            (lz4frame.BLOCKSIZE_MAX1MB, False, False, False, False),
            (lz4frame.BLOCKSIZE_MAX4MB, False, True, False, False),
            (lz4frame.BLOCKSIZE_MAX64KB, True, True, False, False),
            (lz4frame.BLOCKSIZE_MAX64KB, False, True, True, False),
            (lz4frame.BLOCKSIZE_MAX64KB, False, False, False, True),
        ]:
            frame = lz4frame.compress(data, block_size=block_size, block_linked=linked,
                                      store_size=size_flag, content_checksum=c_sum,
                                      block_checksum=b_sum)
            plain = not linked and not c_sum and not b_sum
            out.append((frame, plain))
        for magic in (0, 1, 2):
            out.append((compression.compress(3, data, magic=magic), True))
    return out


def test_library_found() -> None:
    module, path = _fast().library()
    assert module == "lz4.block" and path


def test_header_checksum_matches() -> None:
    rng = random.Random(1)
    for n in range(15):
        d = rng.randbytes(n)
        assert _fast().header_checksum(d) == lz4_codec.header_checksum(b"\0\0\0\0" + d)


def test_frames_every_shape() -> None:
    rng = random.Random(2)
    taken = 0
    for frame, plain in _frames(rng):
        for magic in (0, 1, 2):
            fast = _fast().decompress(frame, LIMIT, magic)
            general = _outcome(lz4_codec.decompress, memoryview(frame), LIMIT, magic)
            assert general[0] == "ok"
            assert general == _outcome(compression.decompress, 3, frame, LIMIT, magic=magic)
            if fast is not None:
                assert ("ok", fast) == general
                taken += 1
            elif plain and (magic == 0 or frame[4] & 0x60 == 0x60):
                # kcodec's magic-0 frames carry Kafka's legacy header checksum, which the
                # fast path leaves to the general path for magic 1 and 2
                legacy_hc = frame[6] != lz4_codec.header_checksum(frame[:6])
                assert legacy_hc and magic != 0, (len(frame), magic)
    assert taken > 100


def test_concatenated_and_skippable_frames_take_the_general_path() -> None:
    a = lz4frame.compress(b"a" * 1000)
    b = lz4frame.compress(b"b" * 1000)
    skip = (0x184D2A51).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"xyz"
    for data, expected in ((a + b, b"a" * 1000 + b"b" * 1000), (a + skip, b"a" * 1000),
                           (skip + a, b"a" * 1000)):
        assert _fast().decompress(data, LIMIT, 2) is None
        assert compression.decompress(3, data) == expected


def test_budget() -> None:
    data = b"x" * 200_000
    for store_size in (True, False):
        frame = lz4frame.compress(data, block_size=lz4frame.BLOCKSIZE_MAX64KB,
                                  block_linked=False, store_size=store_size)
        for limit in (0, 1, 199_999):
            assert _fast().decompress(frame, limit, 2) is None
            with pytest.raises(DecompressionLimitError):
                compression.decompress(3, frame, limit)
        assert _fast().decompress(frame, 200_000, 2) == data
        assert compression.decompress(3, frame, 200_000) == data


def test_corrupted_frames_agree_with_the_general_path() -> None:
    rng = random.Random(3)
    frames = [f for f, _ in _frames(rng) if len(f) < 200_000]
    for _ in range(3000):
        frame = bytearray(rng.choice(frames))
        op = rng.randrange(4)
        if op == 0 and frame:
            for _ in range(rng.randrange(1, 4)):
                frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
        elif op == 1 and frame:
            del frame[rng.randrange(len(frame)):]
        elif op == 2:
            frame += rng.randbytes(rng.randrange(1, 8))
        elif frame:
            # a header byte (FLG, BD, size, HC) or a block size word
            frame[rng.randrange(min(len(frame), 24))] = rng.randrange(256)
        data = bytes(frame)
        magic = rng.randrange(3)
        limit = rng.choice([LIMIT, 1000, 70_000])
        fast = _fast().decompress(data, limit, magic)
        general = _outcome(lz4_codec.decompress, memoryview(data), limit, magic)
        if fast is not None:
            assert general == ("ok", fast)
        assert _outcome(compression.decompress, 3, data, limit, magic=magic) == general


def test_decompress_by_id_takes_the_fast_path_with_the_registry_s_answers() -> None:
    """compression.decompress(3, ...) goes to C at once only for arguments the registry
    takes as they are; every other spelling and limit gives the pure twin's answer."""
    import sys

    from kcodec._py import compression as pure

    data = compression.compress(3, b"kafka " * 5000)
    n = len(b"kafka " * 5000)
    cases = [((3, data), {}), ((3, data, n), {}), ((3, data, n - 1), {}),
             ((3, data, 0), {}), ((3, data, -1), {}), ((3, data, True), {}),
             ((3, data, sys.maxsize), {}), ((3, data, sys.maxsize + 1), {}),
             ((3, data), {"magic": 0}), ((3, data), {"magic": 1}), ((3, data), {"magic": 3}),
             ((3, data), {"magic": True}), (("lz4", data), {}), ((3, memoryview(data)), {}),
             ((3, bytearray(data)), {}), ((3, "text"), {}), ((True, data), {})]
    for args, kwargs in cases:
        assert _outcome(compression.decompress, *args, **kwargs) == \
            _outcome(pure.decompress, *args, **kwargs), (args[0], args[2:], kwargs)
