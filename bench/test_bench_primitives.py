"""Primitives: workloads C-crc32c, C-crc32 and C-varint of ../shared/reference/workloads.md.

    C-crc32c   CRC-32C of one 1 MiB buffer: kcodec (compiled, its forced table backend, pure)
               vs the crc32c package, google-crc32c, kafka-python and aiokafka (C and py).
    C-crc32    CRC-32 (IEEE) of one 1 MiB buffer: kcodec vs zlib.
    C-varint   encode then decode 1,000,000 zigzag varlongs (seeded, 1-10 bytes each):
               kcodec bulk (compiled, pure) and per value, kafka-python, aiokafka (C and py).
    C-crc32c-threads  4 x 1 MiB CRC-32C in 2 threads vs 1: does releasing the GIL pay?

Targets: compiled CRC-32C >= 0.9x the crc32c package; compiled varint >= 10x pure.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import crc32c as crc32c_package
import google_crc32c
import pytest
from aiokafka.record import util as aio_util
from aiokafka.record._crecords import cutil as aio_cutil
from kafka.record import util as kp_util

from bench.conftest import MiB, crc_buffer, twin, varlong_values

DATA = crc_buffer()
EXPECTED_CRC32C = crc32c_package.crc32c(DATA)


def _crc32c_impls() -> dict[str, Callable[[], Callable[[Any], int]]]:
    return {
        "kcodec cython": lambda: twin("crc", "cython").crc32c,
        "kcodec cython (table backend)": lambda: twin("crc", "cython")._crc32c_table,
        "kcodec python": lambda: twin("crc", "python").crc32c,
        "crc32c package": lambda: crc32c_package.crc32c,
        "google-crc32c": lambda: google_crc32c.value,
        "kafka-python calc_crc32c": lambda: kp_util.calc_crc32c,
        "aiokafka C crc32c_cython": lambda: aio_cutil.crc32c_cython,
    }


@pytest.mark.benchmark(group="C-crc32c")
@pytest.mark.parametrize("name", list(_crc32c_impls()))
def test_crc32c_1mib(benchmark, ratios, name: str) -> None:
    fn = _crc32c_impls()[name]()
    assert benchmark(fn, DATA) == EXPECTED_CRC32C
    ratios.add("C-crc32c", name, benchmark, amount=len(DATA), unit="B")


@pytest.mark.benchmark(group="C-crc32c")
def test_crc32c_1mib_aiokafka_pure(benchmark, ratios) -> None:
    """aiokafka's pure-Python path loops per byte in Python: timed on 64 KiB, scaled."""
    chunk = DATA[: 64 * 1024]
    result = benchmark.pedantic(aio_util.calc_crc32c_py, (chunk,), rounds=3, iterations=1)
    assert result == crc32c_package.crc32c(chunk)
    ratios.add("C-crc32c", "aiokafka python (64 KiB, scaled)", _Scaled(benchmark, 16),
               amount=len(DATA), unit="B")


class _Scaled:
    """A benchmark's stats as if the work had been ``factor`` times larger."""

    def __init__(self, benchmark: Any, factor: float) -> None:
        inner = getattr(benchmark.stats, "stats", benchmark.stats)
        self.stats = type("S", (), {"median": inner.median * factor, "min": inner.min * factor})()


def _crc32_impls() -> dict[str, Callable[[], Callable[[Any], int]]]:
    return {
        "kcodec cython": lambda: twin("crc", "cython").crc32,
        "kcodec python": lambda: twin("crc", "python").crc32,
        "zlib.crc32": lambda: zlib.crc32,
        "kafka-python calc_crc32": lambda: kp_util.calc_crc32,
    }


@pytest.mark.benchmark(group="C-crc32")
@pytest.mark.parametrize("name", list(_crc32_impls()))
def test_crc32_1mib(benchmark, ratios, name: str) -> None:
    fn = _crc32_impls()[name]()
    assert benchmark(fn, DATA) == zlib.crc32(DATA)
    ratios.add("C-crc32", name, benchmark, amount=len(DATA), unit="B")


@pytest.mark.benchmark(group="C-crc32c-threads")
@pytest.mark.parametrize("threads", [1, 2])
def test_crc32c_threads(benchmark, ratios, threads: int) -> None:
    """Four 1 MiB buffers; with the GIL released two threads should take about half."""
    crc = twin("crc", "cython").crc32c
    bufs = [crc_buffer(MiB + i) for i in range(4)]
    with ThreadPoolExecutor(threads) as pool:
        out = benchmark(lambda: list(pool.map(crc, bufs)))
    assert out == [crc32c_package.crc32c(b) for b in bufs]
    ratios.add("C-crc32c-threads", f"kcodec cython, {threads} thread(s)" if threads > 1
               else "kcodec cython", benchmark, amount=4 * MiB, unit="B")


# -- C-varint ------------------------------------------------------------------------------

VALUES = varlong_values()
N = len(VALUES)


def _kcodec_bulk(impl: str) -> Callable[[], Any]:
    m = twin("varint", impl)

    def run() -> Any:
        data = m.encode_varlongs(VALUES)
        values, _ = m.decode_varlongs(data, N)
        return values

    return run


def _kcodec_per_value(impl: str) -> Callable[[], Any]:
    m = twin("varint", impl)
    encode, decode = m.encode_varlong, m.decode_varlong

    def run() -> Any:
        data = b"".join([encode(v) for v in VALUES])
        out, pos = [], 0
        append = out.append
        for _ in range(N):
            v, pos = decode(data, pos)
            append(v)
        return out

    return run


def _peer(encode: Callable[..., Any], decode: Callable[..., Any]) -> Callable[[], Any]:
    def run() -> Any:
        buf = bytearray()
        write = buf.append
        for v in VALUES:
            encode(v, write)
        out, pos = [], 0
        append = out.append
        for _ in range(N):
            v, pos = decode(buf, pos)
            append(v)
        return out

    return run


VARINT_IMPLS: dict[str, Callable[[], Callable[[], Any]]] = {
    "kcodec cython": lambda: _kcodec_bulk("cython"),
    "kcodec cython (per value)": lambda: _kcodec_per_value("cython"),
    "kcodec python": lambda: _kcodec_bulk("python"),
    "kafka-python": lambda: _peer(kp_util.encode_varint, kp_util.decode_varint),
    "aiokafka C (cutil)": lambda: _peer(aio_cutil.encode_varint_cython, aio_cutil.decode_varint_cython),
    "aiokafka python": lambda: _peer(aio_util.encode_varint_py, aio_util.decode_varint_py),
}
# Pure-Python loops over a million values take seconds a round: time them fewer rounds.
SLOW = {"kcodec python", "kafka-python", "aiokafka python", "kcodec cython (per value)",
        "aiokafka C (cutil)"}


@pytest.mark.benchmark(group="C-varint")
@pytest.mark.parametrize("name", list(VARINT_IMPLS))
def test_varint_1m(benchmark, ratios, name: str) -> None:
    run = VARINT_IMPLS[name]()
    if name in SLOW:
        out = benchmark.pedantic(run, rounds=2, iterations=1)
    else:
        out = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    assert out == VALUES
    ratios.add("C-varint", name, benchmark, amount=N, unit="values")
