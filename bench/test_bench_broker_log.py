"""The broker's partition log: append and read throughput, memory and disk, side by side.

    B-append-none   append 100 produced v2 batches of 100 R-* records each (uncompressed,
                    1.35 MB) to a fresh log: Kafka's validation (CRC, framing, every record
                    walked for counts, offset deltas, timestamps and field lengths) and
                    offsets assigned in place. Memory and disk (no fsync: Kafka's default).
    B-append-lz4    the same batches lz4-compressed (each one decompressed to validate it).
    B-read          read the whole log back in 1 MiB fetches (``read(offset, 1 MiB)``),
                    memory and disk.

There is no Python peer broker log; the rows to compare with are what any broker must do
at least, on the same bytes: a raw ``os.write`` of them to a file (the floor of a disk
append), aiokafka's compiled reader validating the same batches (CRC and every record:
the cost of the same validation built on a peer), and for reads a bare ``os.pread``.
kcodec runs both twins (the pure one by swapping the log's reader, record walk and CRC for
the pure twins').

    python -m pytest bench/test_bench_broker_log.py --benchmark-only -q
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.record import memory_records as aio_memory

from bench.conftest import IMPLS, twin, workload_records
from kcodec import IMPLEMENTATION
from kcodec.broker.log import LogConfig, LogManager
from kcodec.broker.log import validate as validate_mod
from kcodec.records import RecordBatchBuilder

RECORDS = workload_records(100)
BATCHES = 100
NOW = 1_700_000_100_000


def _batches(codec: int) -> list[bytes]:
    out = []
    for _ in range(BATCHES):
        b = RecordBatchBuilder(compression=codec)
        for r in RECORDS:
            b.append(r.key, r.value, r.headers, timestamp=r.timestamp)
        out.append(bytes(b.build()))
    return out


DATA = {"none": _batches(0), "lz4": _batches(3)}
RECORDS_TOTAL = BATCHES * len(RECORDS)


@pytest.fixture
def use_impl(monkeypatch: pytest.MonkeyPatch) -> Any:
    def apply(impl: str) -> None:
        monkeypatch.setattr(validate_mod, "iter_batches", twin("batch", impl).iter_batches)
        monkeypatch.setattr(validate_mod, "crc32c", twin("crc", impl).crc32c)
        monkeypatch.setattr(validate_mod, "scan_records_v2",
                            twin("segscan", impl).scan_records_v2)
    return apply


@pytest.fixture
def tmpdir_factory_fresh() -> Iterator[Any]:
    dirs: list[tempfile.TemporaryDirectory[str]] = []

    def make() -> str:
        d = tempfile.TemporaryDirectory(prefix="kcodec-bench-log-")
        dirs.append(d)
        return d.name
    yield make
    for d in dirs:
        d.cleanup()


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("where", ["memory", "disk"])
@pytest.mark.parametrize("impl", IMPLS)
def test_append_kcodec(benchmark, ratios, use_impl, tmpdir_factory_fresh, impl, where,
                       codec) -> None:
    if impl == "python" and where == "disk":
        pytest.skip("the pure twin is measured in memory only")
    use_impl(impl)
    batches = DATA[codec]
    managers: list[LogManager] = []

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        # a fresh log each round, made (and the last one closed) outside the timing
        while managers:
            managers.pop().close()
        mgr = LogManager(None if where == "memory" else tmpdir_factory_fresh())
        managers.append(mgr)
        return (mgr.create("bench", 0, LogConfig()),), {}

    def run(log: Any) -> int:
        for b in batches:
            log.append(b, now_ms=NOW)
        return log.log_end_offset
    rounds = 20 if impl == "python" else 60
    assert benchmark.pedantic(run, setup=setup, rounds=rounds) == RECORDS_TOTAL
    for mgr in managers:
        mgr.close()
    name = f"kcodec {impl}" if where == "memory" else f"kcodec {impl} disk"
    ratios.add(f"B-append-{codec}", name, benchmark, RECORDS_TOTAL, "records")


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_append_floor_raw_write(benchmark, ratios, tmpdir_factory_fresh, codec) -> None:
    batches = DATA[codec]

    def run() -> int:
        path = os.path.join(tmpdir_factory_fresh(), "raw.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for b in batches:
                os.write(fd, b)
        finally:
            os.close(fd)
        return len(batches)
    benchmark(run)
    ratios.add(f"B-append-{codec}", "raw os.write (floor)", benchmark, RECORDS_TOTAL,
               "records")


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_append_aiokafka_validation(benchmark, ratios, codec) -> None:
    batches = DATA[codec]

    def run() -> int:
        n = 0
        for b in batches:
            mr = aio_memory.MemoryRecords(b)
            while (batch := mr.next_batch()) is not None:
                assert batch.validate_crc()
                for r in batch:
                    n += r.offset >= 0 and r.timestamp > 0
        return n
    assert benchmark(run) == RECORDS_TOTAL
    ratios.add(f"B-append-{codec}", "aiokafka C validate only", benchmark, RECORDS_TOTAL,
               "records")


@pytest.fixture(scope="module")
def filled() -> Iterator[dict[str, Any]]:
    d = tempfile.TemporaryDirectory(prefix="kcodec-bench-read-")
    logs = {}
    for where, path in (("memory", None), ("disk", d.name)):
        mgr = LogManager(path)
        mgr.open()
        log = mgr.create("bench", 0, LogConfig())
        for b in DATA["none"]:
            log.append(b, now_ms=NOW)
        logs[where] = log
    yield logs
    d.cleanup()


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_read(benchmark, ratios, filled, where) -> None:
    log = filled[where]

    def run() -> int:
        offset, total = 0, 0
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20)
            total += len(data)
            offset = _next_offset(data)     # the next fetch starts after the last batch
        return total
    total = benchmark(run)
    assert total == log.size_bytes
    name = f"kcodec {IMPLEMENTATION}" if where == "memory" else "kcodec disk"
    ratios.add("B-read", name, benchmark, total, "B")


def _next_offset(data: bytes) -> int:
    """One past the last offset of the last batch in ``data`` (header fields only)."""
    pos = 0
    nxt = 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        delta = int.from_bytes(data[pos + 23:pos + 27], "big")
        nxt = int.from_bytes(data[pos:pos + 8], "big") + delta + 1
        pos += 12 + length
    return nxt


def test_read_floor_pread(benchmark, ratios, filled) -> None:
    log = filled["disk"]
    path = log.segments[0].path
    size = log.size_bytes

    def run() -> int:
        fd = os.open(path, os.O_RDONLY)
        try:
            total = 0
            while total < size:
                total += len(os.pread(fd, min(1 << 20, size - total), total))
            return total
        finally:
            os.close(fd)
    assert benchmark(run) == size
    ratios.add("B-read", "raw os.pread (floor)", benchmark, size, "B")
