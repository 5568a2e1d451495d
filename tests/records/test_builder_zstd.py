"""zstd batches built by the compiled builder through libzstd called from C (kcodec/_cy/_zstd):
the same bytes as the pure twin and as ``zstandard.ZstdCompressor(level).compress`` of the
records section, at every level, as bytes and bytearray, with and without
``compress_only_if_smaller``, empty, and from several threads at once."""

from __future__ import annotations

import random
import threading

import pytest

from kcodec.records import iter_batches
from tests.conftest import NO_EXT

zstandard = pytest.importorskip("zstandard")

TS = 1_700_000_000_000
HEADER = 61


def _rows(rng: random.Random, n: int) -> list[tuple]:
    out = []
    for _ in range(n):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 20))
        value = None if rng.random() < 0.1 else rng.choice(
            [rng.randbytes(rng.randrange(0, 300)), b"abc" * rng.randrange(0, 200)])
        headers = [("h", None if rng.random() < 0.5 else b"x" * rng.randrange(5))
                   for _ in range(rng.randrange(3))]
        out.append((key, value, headers, TS + rng.randrange(-1000, 1000)))
    return out


def _build(module, rows, level, only_smaller=False, as_bytearray=False):
    b = module.RecordBatchBuilder(compression=4, compression_level=level,
                                  compress_only_if_smaller=only_smaller, producer_id=5,
                                  producer_epoch=1, base_sequence=7)
    for k, v, h, ts in rows:
        assert b.append(k, v, h, ts) is not None
    return b.build(as_bytearray=as_bytearray)


def _section(module, rows) -> bytes:
    b = module.RecordBatchBuilder()
    for k, v, h, ts in rows:
        b.append(k, v, h, ts)
    return b.build()[HEADER:]


@pytest.mark.skipif(NO_EXT, reason="no compiled twin to compare")
def test_compiled_builder_calls_the_zstandard_library() -> None:
    from kcodec._codecs import zstd_codec
    from kcodec._cy import _zstd as zs
    if zstd_codec.backend().name != "zstandard":
        assert zs.library() is None
        return
    module, version = zs.library()
    assert module == "zstandard._cffi"
    major, minor, patch = zstandard.ZSTD_VERSION
    assert version == major * 10000 + minor * 100 + patch


@pytest.mark.parametrize("level", [None, -7, 1, 3, 6, 19])
@pytest.mark.parametrize("n", [0, 1, 3, 200])
def test_twins_and_zstandard_agree(pair, level, n) -> None:
    cy, py = pair("builder")
    rows = _rows(random.Random(f"{level}/{n}"), n)
    expected = zstandard.ZstdCompressor(level=3 if level is None else level).compress(
        _section(py, rows))
    for as_bytearray in (False, True):
        outs = [_build(m, rows, level, as_bytearray=as_bytearray) for m in (cy, py)]
        assert outs[0] == outs[1]
        assert type(outs[0]) is type(outs[1]) is (bytearray if as_bytearray else bytes)
        assert bytes(outs[0][HEADER:]) == expected
        (batch,) = list(iter_batches(bytes(outs[0])))
        assert batch.validate_crc() and batch.compression == 4
        assert [(r.key, r.value, r.headers, r.timestamp) for r in batch] == [
            (k, v, h, ts) for k, v, h, ts in rows]


@pytest.mark.parametrize("as_bytearray", [False, True])
def test_compress_only_if_smaller(pair, as_bytearray) -> None:
    cy, py = pair("builder")
    rng = random.Random(3)
    noise = [(None, rng.randbytes(1000), [], TS + i) for i in range(5)]    # incompressible
    text = [(None, b"kafka " * 200, [], TS + i) for i in range(5)]
    for rows, codec in ((noise, 0), (text, 4)):
        outs = [_build(m, rows, None, True, as_bytearray) for m in (cy, py)]
        assert outs[0] == outs[1]
        (batch,) = list(iter_batches(bytes(outs[0])))
        assert batch.compression == codec and batch.validate_crc()
        assert [r.value for r in batch] == [v for _, v, _, _ in rows]
        if codec == 0:
            assert bytes(outs[0][HEADER:]) == _section(py, rows)


def test_threads_build_at_once(pair) -> None:
    """Builders on several threads (libzstd runs without the GIL; a call that finds the
    shared context in use gets one of its own): every batch as built alone."""
    cy, py = pair("builder")
    sets = [_rows(random.Random(i), 400) for i in range(6)]
    expected = [_build(py, rows, 3) for rows in sets]
    got: list = [None] * len(sets)
    errors: list = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                out = _build(cy, sets[i], 3)
                if out != expected[i]:
                    raise AssertionError(i)
            got[i] = out
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(sets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert got == expected


@pytest.mark.skipif(NO_EXT, reason="no compiled twin")
def test_direct_path_needs_no_cffi_package() -> None:
    """The library's functions are found in zstandard's CFFI module's shared object without
    importing that module, so a process without the cffi package gets them too."""
    import subprocess
    import sys

    from kcodec._codecs import zstd_codec
    if zstd_codec.backend().name != "zstandard":
        pytest.skip("another zstd backend: the direct path is not used")
    code = (
        "import sys; sys.modules['_cffi_backend'] = None\n"
        "import zstandard\n"
        "from kcodec._cy import _zstd\n"
        "from kcodec._cy.builder import RecordBatchBuilder\n"
        "b = RecordBatchBuilder(compression=4)\n"
        "b.append(b'k', b'v' * 500, [], 1)\n"
        "out = b.build()\n"
        "ref = RecordBatchBuilder()\n"
        "ref.append(b'k', b'v' * 500, [], 1)\n"
        "assert out[61:] == zstandard.ZstdCompressor(level=3).compress(ref.build()[61:])\n"
        "print(_zstd.library()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "zstandard._cffi"
