"""Record batches: workloads R and L of ../shared/reference/workloads.md, side by side.

    R-decode      decode one v2 batch of 1,000 records into record objects, touching offset,
                  timestamp, key, value and every header (none, gzip, snappy, lz4, zstd)
    R-decode-crc  the same plus CRC-32C validation (none)
    R-build       build one v2 batch from the 1,000 records (every codec)
    L-decode      the same records as a magic-1 MessageSet (none; gzip, snappy, lz4 wrapper)
    L-build       build that MessageSet (none; gzip, snappy, lz4 wrapper)

Peers: aiokafka's compiled records (the default), aiokafka's pure-Python classes (the very
classes AIOKAFKA_NO_EXTENSIONS=1 selects; they import side by side, so no subprocess is
needed), kafka-python. kcodec runs both twins.

Targets: R-decode none compiled >= 1.5x aiokafka C (aim 2x), pure >= 1.5x
kafka-python; R-build none >= 1.5x aiokafka C; each codec >= 1.2x; R-decode-crc >= 1.5x;
L-decode and L-build >= 1.2x aiokafka C.

    python -m pytest bench/test_bench_records.py --benchmark-disable-gc -q
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record import legacy_records as aio_legacy
from aiokafka.record import memory_records as aio_memory
from kafka.record import default_records as kp_default
from kafka.record import legacy_records as kp_legacy
from kafka.record import memory_records as kp_memory

from bench.conftest import twin, workload_records

RECORDS = workload_records()
N = len(RECORDS)
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# What a Java producer hands a consumer (workloads.md): kcodec's compress writes exactly that
# (gzip 6, lz4 9 in independent blocks without content size, zstd 3, snappy xerial 32 KiB).
LEVELS = {"none": None, "gzip": 6, "snappy": None, "lz4": 9, "zstd": 3}


def _input_v2(codec: str) -> bytes:
    b = twin("builder", "python").RecordBatchBuilder(compression=CODECS[codec],
                                                      compression_level=LEVELS[codec])
    for r in RECORDS:
        b.append(r.key, r.value, r.headers, r.timestamp)
    return b.build()


def _input_legacy(codec: str) -> bytes:
    b = twin("legacy", "python").MessageSetBuilder(magic=1, compression=CODECS[codec])
    for r in RECORDS:
        b.append(r.key, r.value, r.timestamp)
    return b.build()


def _touch(records: Any) -> int:
    """Read offset, timestamp, key, value and every header of every record (workload R)."""
    n = 0
    for r in records:
        r.offset  # noqa: B018
        r.timestamp  # noqa: B018
        r.key  # noqa: B018
        r.value  # noqa: B018
        for h in r.headers:
            h[0]  # noqa: B018
            h[1]  # noqa: B018
        n += 1
    return n


# -- decoders -------------------------------------------------------------------------------

def _kcodec_decode(impl: str, validate: bool) -> Callable[[bytes], int]:
    iter_batches = twin("batch", impl).iter_batches

    def run(data: bytes) -> int:
        n = 0
        for batch in iter_batches(data, validate_crc=validate):
            n += _touch(batch)
        return n

    return run


def _peer_decode(batch_cls: Any, validate: bool) -> Callable[[bytes], int]:
    def run(data: bytes) -> int:
        batch = batch_cls(data)
        if validate:
            assert batch.validate_crc()
        return _touch(batch)

    return run


def _peer_memory_decode(memory_cls: Any) -> Callable[[bytes], int]:
    def run(data: bytes) -> int:
        mr = memory_cls(data)
        n = 0
        while True:
            batch = mr.next_batch()
            if batch is None:
                return n
            n += _touch(batch)

    return run


def _decoders(validate: bool) -> dict[str, Callable[[], Callable[[bytes], int]]]:
    return {
        "kcodec cython": lambda: _kcodec_decode("cython", validate),
        "kcodec python": lambda: _kcodec_decode("python", validate),
        "aiokafka C": lambda: _peer_decode(aio_default.DefaultRecordBatch, validate),
        "aiokafka python": lambda: _peer_decode(aio_default._DefaultRecordBatchPy, validate),
        "kafka-python": lambda: _peer_decode(kp_default.DefaultRecordBatch, validate),
    }


@pytest.mark.benchmark(group="R-decode")
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("name", list(_decoders(False)))
def test_r_decode(benchmark, ratios, name: str, codec: str) -> None:
    data = _input_v2(codec)
    fn = _decoders(False)[name]()
    assert benchmark(fn, data) == N
    ratios.add(f"R-decode {codec}", name, benchmark, amount=N, unit="rec")


@pytest.mark.benchmark(group="R-decode-crc")
@pytest.mark.parametrize("name", list(_decoders(True)))
def test_r_decode_crc(benchmark, ratios, name: str) -> None:
    data = _input_v2("none")
    fn = _decoders(True)[name]()
    assert benchmark(fn, data) == N
    ratios.add("R-decode-crc none", name, benchmark, amount=N, unit="rec")


# -- builders -------------------------------------------------------------------------------

def _kcodec_build(impl: str, codec: str) -> Callable[[], bytes]:
    cls = twin("builder", impl).RecordBatchBuilder
    c, lvl = CODECS[codec], LEVELS[codec]

    def run() -> bytes:
        b = cls(compression=c, compression_level=lvl)
        append = b.append
        for r in RECORDS:
            append(r.key, r.value, r.headers, r.timestamp)
        return b.build()

    return run


def _peer_build(cls: Any, codec: str) -> Callable[[], bytes]:
    c = CODECS[codec]

    def run() -> bytes:
        b = cls(magic=2, compression_type=c, is_transactional=0, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
        append = b.append
        for r in RECORDS:
            append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value,
                   headers=r.headers)
        return b.build()

    return run


BUILDERS = {
    "kcodec cython": lambda codec: _kcodec_build("cython", codec),
    "kcodec python": lambda codec: _kcodec_build("python", codec),
    "aiokafka C": lambda codec: _peer_build(aio_default.DefaultRecordBatchBuilder, codec),
    "aiokafka python": lambda codec: _peer_build(aio_default._DefaultRecordBatchBuilderPy,
                                                 codec),
    "kafka-python": lambda codec: _peer_build(kp_default.DefaultRecordBatchBuilder, codec),
}


@pytest.mark.benchmark(group="R-build")
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("name", list(BUILDERS))
def test_r_build(benchmark, ratios, name: str, codec: str) -> None:
    fn = BUILDERS[name](codec)
    out = benchmark(fn)
    assert _kcodec_decode("python", True)(bytes(out)) == N
    ratios.add(f"R-build {codec}", name, benchmark, amount=N, unit="rec")


# -- legacy ---------------------------------------------------------------------------------

L_CODECS = ["none", "gzip", "snappy", "lz4"]   # zstd needs magic 2

# The peers do not check legacy CRCs while iterating; kcodec is run the same way.
L_DECODERS = {
    "kcodec cython": lambda: _kcodec_decode("cython", False),
    "kcodec python": lambda: _kcodec_decode("python", False),
    "aiokafka C": lambda: _peer_memory_decode(aio_memory.MemoryRecords),
    "aiokafka python": lambda: _peer_memory_decode(aio_memory._MemoryRecordsPy),
    "kafka-python": lambda: _peer_memory_decode(kp_memory.MemoryRecords),
}


@pytest.mark.benchmark(group="L-decode")
@pytest.mark.parametrize("codec", L_CODECS)
@pytest.mark.parametrize("name", list(L_DECODERS))
def test_l_decode(benchmark, ratios, name: str, codec: str) -> None:
    data = _input_legacy(codec)
    fn = L_DECODERS[name]()
    assert benchmark(fn, data) == N
    ratios.add(f"L-decode {codec}", name, benchmark, amount=N, unit="rec")


def _kcodec_legacy_build(impl: str, codec: str) -> Callable[[], bytes]:
    cls = twin("legacy", impl).MessageSetBuilder
    c = CODECS[codec]

    def run() -> bytes:
        b = cls(magic=1, compression=c, max_size=1 << 22)
        append = b.append
        for r in RECORDS:
            append(r.key, r.value, r.timestamp)
        return b.build()

    return run


def _peer_legacy_build(cls: Any, codec: str) -> Callable[[], bytes]:
    c = CODECS[codec]

    def run() -> bytes:
        b = cls(magic=1, compression_type=c, batch_size=1 << 22)
        append = b.append
        for r in RECORDS:
            append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value)
        return b.build()

    return run


L_BUILDERS = {
    "kcodec cython": lambda codec: _kcodec_legacy_build("cython", codec),
    "kcodec python": lambda codec: _kcodec_legacy_build("python", codec),
    "aiokafka C": lambda codec: _peer_legacy_build(aio_legacy.LegacyRecordBatchBuilder, codec),
    "aiokafka python": lambda codec: _peer_legacy_build(aio_legacy._LegacyRecordBatchBuilderPy,
                                                        codec),
    "kafka-python": lambda codec: _peer_legacy_build(kp_legacy.LegacyRecordBatchBuilder, codec),
}


@pytest.mark.benchmark(group="L-build")
@pytest.mark.parametrize("codec", L_CODECS)
@pytest.mark.parametrize("name", list(L_BUILDERS))
def test_l_build(benchmark, ratios, name: str, codec: str) -> None:
    fn = L_BUILDERS[name](codec)
    out = benchmark(fn)
    assert _kcodec_decode("python", True)(bytes(out)) == N
    ratios.add(f"L-build {codec}", name, benchmark, amount=N, unit="rec")
