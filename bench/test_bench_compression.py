"""Compression: decompress and compress one batch body per codec, kcodec vs the peers.

    X-decompress  decompress the records of R-* (1,000 records, keys and values laid end to
                  end as a batch body, ~130 KB) in each codec, in the form a Java producer
                  writes (workloads.md): gzip 6; lz4 9, independent blocks, no content size;
                  zstd 3, no content size; snappy xerial with 32 KiB blocks.
                  kcodec (compiled and pure xerial twin for snappy) vs kafka-python's and
                  aiokafka's codec functions and the bare library call (unbounded).
    X-compress    the same body compressed at Kafka's default levels.

Ratios show the cost of kcodec's bounding and checks over the bare library and the peers.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.frame
import pytest
import zstandard
from aiokafka import codec as aio
from kafka import codec as kp

from bench.conftest import twin, workload_records
from kcodec import compression

BODY = b"".join(r.key + r.value for r in workload_records())


def _java_like(codec: str) -> bytes:
    if codec == "gzip":
        return compression.compress("gzip", BODY, 6)
    if codec == "lz4":
        return lz4.frame.compress(BODY, block_linked=False, store_size=False,
                                  block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    if codec == "zstd":
        return zstandard.ZstdCompressor(level=3, write_content_size=False).compress(BODY)
    return compression.compress("snappy", BODY)


BLOBS = {c: _java_like(c) for c in ("gzip", "snappy", "lz4", "zstd")}


def _kcodec(impl: str, op: str, codec: str) -> Callable[[bytes], Any]:
    """``op`` ("compress" or "decompress") of the ``impl`` compression twin for ``codec``,
    looked up once, on the first call (the twin may be missing: then the test skips)."""
    fn: list[Callable[..., Any]] = []

    def run(b: bytes) -> Any:
        if not fn:
            fn.append(getattr(twin("compression", impl), op))
        return fn[0](codec, b)

    return run


def _bare(codec: str) -> Callable[[bytes], Any]:
    return {
        "gzip": lambda b: zlib.decompress(b, 31),
        "lz4": lz4.frame.decompress,
        "zstd": lambda b: zstandard.ZstdDecompressor().stream_reader(b).read(),
        "snappy": None,
    }[codec]


def _decoders(codec: str) -> dict[str, Callable[[bytes], Any]]:
    out: dict[str, Callable[[bytes], Any]] = {
        "kcodec cython": _kcodec("cython", "decompress", codec),
        "kafka-python": getattr(kp, f"{codec}_decode"),
        "aiokafka": getattr(aio, f"{codec}_decode"),
    }
    if codec == "snappy":
        out["kcodec python"] = _kcodec("python", "decompress", codec)
    else:
        out["bare library"] = _bare(codec)
    return out


CASES = [(c, n) for c in BLOBS for n in _decoders(c)]


@pytest.mark.benchmark(group="X-decompress")
@pytest.mark.parametrize("codec,name", CASES)
def test_decompress(benchmark, ratios, codec: str, name: str) -> None:
    blob = BLOBS[codec]
    fn = _decoders(codec)[name]
    assert bytes(benchmark(fn, blob)) == BODY
    ratios.add(f"X-decompress {codec}", name, benchmark, amount=len(BODY), unit="B")


def _encoders(codec: str) -> dict[str, Callable[[bytes], Any]]:
    return {
        "kcodec cython": _kcodec("cython", "compress", codec),
        "kafka-python": {"gzip": lambda b: kp.gzip_encode(b, 6), "snappy": kp.snappy_encode,
                         "lz4": kp.lz4_encode, "zstd": kp.zstd_encode}[codec],
        "aiokafka": {"gzip": lambda b: aio.gzip_encode(b, 6), "snappy": aio.snappy_encode,
                     "lz4": aio.lz4_encode, "zstd": aio.zstd_encode}[codec],
    }


@pytest.mark.benchmark(group="X-compress")
@pytest.mark.parametrize("codec,name", [(c, n) for c in BLOBS for n in _encoders(c)])
def test_compress(benchmark, ratios, codec: str, name: str) -> None:
    fn = _encoders(codec)[name]
    blob = benchmark(fn, BODY)
    assert compression.decompress(codec, blob) == BODY
    ratios.add(f"X-compress {codec}", name, benchmark, amount=len(BODY), unit="B")


del cramjam
