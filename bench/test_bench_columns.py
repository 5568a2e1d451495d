"""R-columns: decode one v2 batch of the R-* records into columns, kcodec vs the peers.

    R-columns   one v2 batch of the 1,000 R-* records (workloads.md), codecs none, lz4 and
                zstd in the form a Java producer writes (lz4 9, independent 64 KiB blocks, no
                content size; zstd 3, no content size), decoded into columns: offsets,
                timestamps, timestamp types, keys, values and headers.
                Entries: kcodec's decode_columns (compiled: CRC-32C checked, as by default;
                without the CRC; with .to_arrow(); the pure twin), kcodec's record reader
                (iter_batches, record objects), and the peers' R-decode as workloads.md
                defines it: decode the batch into record objects touching offset, timestamp,
                key, value and every header (aiokafka's Cython path, kafka-python).

The peers have no columnar decoder: their R-decode is the baseline (target: compiled
R-columns (none) at least 10x aiokafka's R-decode in records/s).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import lz4.frame
import pytest
import zstandard
from aiokafka.record._crecords import DefaultRecordBatch as AioBatch
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from bench.conftest import twin, workload_records
from kcodec.crc import crc32c
from kcodec.records import RecordBatchBuilder, iter_batches

RECORDS = workload_records()
N = len(RECORDS)


def _batch(codec: str) -> bytes:
    b = RecordBatchBuilder(max_size=1 << 24)
    for r in RECORDS:
        b.append(r.key, r.value, r.headers, timestamp=r.timestamp)
    raw = b.build()
    if codec == "none":
        return raw
    body = raw[61:]
    if codec == "lz4":
        packed, cid = lz4.frame.compress(body, compression_level=9, block_linked=False,
                                         store_size=False,
                                         block_size=lz4.frame.BLOCKSIZE_MAX64KB), 3
    else:
        packed, cid = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(body), 4
    attrs = struct.unpack_from(">h", raw, 21)[0] | cid
    tail = struct.pack(">h", attrs) + raw[23:61] + packed
    return raw[:8] + struct.pack(">iibI", 9 + len(tail), -1, 2, crc32c(tail)) + tail


BATCHES = {c: _batch(c) for c in ("none", "lz4", "zstd")}


def _touch_records(records: Any) -> int:
    n = 0
    for r in records:
        _ = r.offset, r.timestamp, r.key, r.value   # the reads are the point
        for h in r.headers:
            _ = h[0], h[1]
        n += 1
    return n


def _kcodec_objects(buf: bytes) -> int:
    return sum(_touch_records(b) for b in iter_batches(buf, validate_crc=False))


def _touch_columns(c: Any) -> int:
    # what a columnar consumer gets: every column, every array and buffer of it, is there
    _ = c.offset, c.timestamp, c.timestamp_type, c.headers.offsets   # the reads are the point
    for col in (c.key, c.value, c.headers.keys, c.headers.values):
        _ = col.offsets, col.data, col.validity
    return len(c)


NAMES = [
    "kcodec cython",
    "kcodec cython, no CRC check",
    "kcodec cython + to_arrow()",
    "kcodec python",
    "kcodec record objects (iter_batches)",
    "aiokafka cython R-decode",
    "kafka-python R-decode",
]


def _entry(name: str) -> Callable[[bytes], int]:
    """The timed callable of an entry (twins are looked up here, outside the timed call)."""
    if name == "kcodec record objects (iter_batches)":
        return _kcodec_objects
    if name == "aiokafka cython R-decode":
        return lambda b: _touch_records(AioBatch(b))
    if name == "kafka-python R-decode":
        return lambda b: _touch_records(KpBatch(b))
    dc = twin("columns", "python" if name == "kcodec python" else "cython").decode_columns
    if name == "kcodec cython, no CRC check":
        return lambda b: _touch_columns(dc(b, validate_crc=False))
    if name == "kcodec cython + to_arrow()":
        return lambda b: dc(b).to_arrow().num_rows
    return lambda b: _touch_columns(dc(b))


@pytest.mark.benchmark(group="R-columns")
@pytest.mark.parametrize("codec,name", [(c, n) for c in BATCHES for n in NAMES])
def test_r_columns(benchmark, ratios, codec: str, name: str) -> None:
    fn = _entry(name)
    buf = BATCHES[codec]
    assert fn(buf) == N
    assert benchmark(fn, buf) == N
    ratios.add(f"R-columns {codec}", name, benchmark, amount=N, unit="records")


def test_columns_match_the_records() -> None:
    """The benchmarked batches decode to the workload's records (not timed)."""
    cols = twin("columns", "cython")
    for buf in BATCHES.values():
        c = cols.decode_columns(buf)
        assert c.key.to_pylist() == [r.key for r in RECORDS]
        assert c.value.to_pylist() == [r.value for r in RECORDS]
        assert c.headers.to_pylist() == [r.headers for r in RECORDS]
        assert c.timestamp.tolist() == [r.timestamp for r in RECORDS]
