"""Log segments: scanning a real Kafka segment, kcodec's LogSegment vs the peers' readers.

    S-scan     the recovery scan of ../shared/reference/segments/__cluster_metadata-0 (4,814
               batches, 353 KB, many tiny batches: the worst case for per-batch overhead):
               every batch framed and its CRC-32C checked. kcodec: ``LogSegment.recover()``
               (offsets checked too; its compiled fast path, ``segscan``, makes no Python
               object per batch) and ``iter_batches`` + ``validate_crc`` (a batch object
               each); peers: kafka-python's and aiokafka's ``MemoryRecords`` +
               ``validate_crc``.
    S-records  the same segment with every record decoded: ``recover(deep=True)`` vs
               iterating every batch's records in the peers.

The peers have no segment reader; these are their nearest equivalents over the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.conftest import IMPLS, twin
from kcodec.records import segment as segment_mod
from kcodec.records.segment import LogSegment

SEGMENT = (Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "segments"
           / "__cluster_metadata-0" / "00000000000000000000.log")
if not SEGMENT.is_file():  # a worktree sits one level deeper than a clone
    SEGMENT = Path(str(SEGMENT).replace("/wt/shared/", "/shared/"))
BATCHES = 4814
RECORDS = 4929


@pytest.fixture(scope="module")
def data() -> bytes:
    assert SEGMENT.is_file(), f"{SEGMENT} not found (../shared/reference beside the clone)"
    return SEGMENT.read_bytes()


def _with_reader(impl: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    mod = twin("batch", impl)
    monkeypatch.setattr(segment_mod, "iter_batches", mod.iter_batches)
    monkeypatch.setattr(segment_mod, "scan_valid_v2", twin("segscan", impl).scan_valid_v2)
    return mod


@pytest.mark.parametrize("impl", IMPLS)
def test_scan_kcodec_recover(benchmark, ratios, impl, monkeypatch) -> None:
    _with_reader(impl, monkeypatch)
    with LogSegment(SEGMENT) as seg:
        res = benchmark(seg.recover)
        assert res.ok and res.batches == BATCHES
    ratios.add("S-scan", f"kcodec {impl}", benchmark, BATCHES, "batches")


@pytest.mark.parametrize("impl", IMPLS)
def test_scan_kcodec_bare(benchmark, ratios, impl, data) -> None:
    mod = twin("batch", impl)
    n = benchmark(lambda: sum(b.validate_crc() for b in mod.iter_batches(data,
                                                                            validate_crc=False)))
    assert n == BATCHES
    ratios.add("S-scan", f"iter_batches {impl} (no segment)", benchmark, BATCHES, "batches")


def _peer_scan(records_cls: Any, data: bytes, deep: bool) -> int:
    mr = records_cls(data)
    n = 0
    while True:
        b = mr.next_batch()
        if b is None:
            return n
        if not b.validate_crc():
            raise AssertionError("bad CRC")
        if deep:
            for _ in b:
                n += 1
        else:
            n += 1


def test_scan_kafka_python(benchmark, ratios, data) -> None:
    from kafka.record.memory_records import MemoryRecords

    assert benchmark(_peer_scan, MemoryRecords, data, False) == BATCHES
    ratios.add("S-scan", "kafka-python", benchmark, BATCHES, "batches")


def test_scan_aiokafka(benchmark, ratios, data) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    assert benchmark(_peer_scan, MemoryRecords, data, False) == BATCHES
    ratios.add("S-scan", "aiokafka", benchmark, BATCHES, "batches")


@pytest.mark.parametrize("impl", IMPLS)
def test_records_kcodec(benchmark, ratios, impl, monkeypatch) -> None:
    _with_reader(impl, monkeypatch)
    with LogSegment(SEGMENT) as seg:
        res = benchmark(lambda: seg.recover(deep=True))
        assert res.ok and res.records == RECORDS
    ratios.add("S-records", f"kcodec {impl}", benchmark, RECORDS, "records")


def test_records_kafka_python(benchmark, ratios, data) -> None:
    from kafka.record.memory_records import MemoryRecords

    assert benchmark(_peer_scan, MemoryRecords, data, True) == RECORDS
    ratios.add("S-records", "kafka-python", benchmark, RECORDS, "records")


def test_records_aiokafka(benchmark, ratios, data) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    assert benchmark(_peer_scan, MemoryRecords, data, True) == RECORDS
    ratios.add("S-records", "aiokafka", benchmark, RECORDS, "records")
