"""decode_columns at real fetch sizes: columns of 64 KiB and more come from src_c/kcbuf.c,
whose released blocks (with whatever an earlier call wrote in them) serve the next call.
Results must not depend on what the memory held before: the same columns as the record
reader, call after call, with earlier results alive or freed, nulls (validity bitmaps
zeroed on reused memory) and growth past the first reservation included."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from kcodec import _impl
from kcodec.records import RecordBatchBuilder

pytestmark = pytest.mark.skipif("cython" not in _impl.twins(),
                                reason="the kcbuf allocator is the compiled twin's")


def _blob(batches: int, per_batch: int, seed: int, nulls: bool) -> bytes:
    parts = []
    for b in range(batches):
        builder = RecordBatchBuilder(base_offset=b * per_batch, max_size=1 << 24)
        for i in range(per_batch):
            j = i + seed
            key = None if nulls and j % 11 == 0 else b"k%08d" % j
            value = None if nulls and j % 13 == 5 else (b"v%d-" % j) * (1 + j % 9)
            headers = [("h", b"x" * (j % 5)), ("g", None)][: j % 3]
            builder.append(key, value, headers, timestamp=1_700_000_000_000 + j)
        parts.append(builder.build())
    return b"".join(parts)


def _arrays(c: Any) -> list[Any]:
    out = [c.offset, c.timestamp, c.timestamp_type, c.headers.offsets]
    for col in (c.key, c.value, c.headers.keys, c.headers.values):
        out += [col.offsets, col.data, col.validity]
    return out


def _same(got: Any, want: Any) -> bool:
    a, b = _arrays(got), _arrays(want)
    return all((x is None and y is None) or (x is not None and y is not None
                                             and np.array_equal(np.asarray(x), np.asarray(y)))
               for x, y in zip(a, b, strict=False))


@pytest.fixture
def cols():
    return _impl.twin("columns", "cython")


def reader_rows(blob: bytes) -> Any:
    """The pure twin's columns: the reference."""
    return _impl.twin("columns", "python").decode_columns(blob)


def test_big_blobs_reuse_memory_and_stay_right(cols) -> None:
    # 1-2 MB blobs: offsets, timestamps, keys, values and headers columns pass 256 KiB.
    blobs = [_blob(6, 4000, seed, nulls=bool(seed % 2)) for seed in (0, 1, 2)]
    want = [reader_rows(b) for b in blobs]
    kept = []
    for round_ in range(2):
        for i, blob in enumerate(blobs):
            got = cols.decode_columns(blob)
            assert len(got) == 24_000
            assert _same(got, want[i]), (round_, i)
            if i == 1:
                kept.append(got)      # alive while later calls run
            del got
            gc.collect()
    for got in kept:   # earlier results were not overwritten by later calls
        assert _same(got, want[1])


def test_growth_past_the_reservation(cols) -> None:
    """A compressed blob reserves per batch: columns grow (mremap) batch after batch."""
    parts = []
    for b in range(6):
        builder = RecordBatchBuilder(compression=1, base_offset=b * 5000, max_size=1 << 24)
        for i in range(5000):
            builder.append(b"key-%d" % i, b"v" * (50 + i % 200), None, timestamp=i)
        parts.append(builder.build())
    blob = b"".join(parts)
    want = reader_rows(blob)
    for _ in range(3):
        got = cols.decode_columns(blob)
        assert _same(got, want)


def _faults_per_call(batches: int, per_batch: int) -> tuple[list[int], int]:
    """Minor page faults of four decode_columns calls in a fresh interpreter (where the C
    allocator's state is the same every time), and the pages the columns take."""
    import subprocess
    import sys

    code = f"""
import resource, numpy as np
from tests.records.test_columns_big import _blob, _arrays
from kcodec import _impl
cols = _impl.twin("columns", "cython")
blob = _blob({batches}, {per_batch}, 3, nulls=False)
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    got = cols.decode_columns(blob)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    pages = sum(np.asarray(a).nbytes for a in _arrays(got) if a is not None) // 4096
    print(faults, pages)
    del got
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    return [int(x) for x in out[0::2]], int(out[1])


def test_warm_calls_write_into_pages_they_already_have(cols) -> None:
    """Each column gets back the kcbuf block it used in the previous call (blocks are cached
    under the column's role), and the per-record columns are sized once from the batch
    headers: a warm call faults in few fresh pages. Before, the columns under 1 MiB doubled
    through malloc (fresh mappings at every call in a new process) and key and value data
    could swap their equal-sized blocks: about 75 % of the pages faulted at every call."""
    faults, pages = _faults_per_call(40, 1500)
    # Before: ~75 % of the pages faulted at every call. An installed wheel measured ~30 %
    # (326 of 1,095) where the in-place build stays under 25 %.
    assert min(faults[1:]) < pages // 3, (faults, pages)


def test_warm_calls_of_a_mid_size_blob_fault_no_fresh_pages(cols) -> None:
    """Columns under kcbuf's minimum came from malloc, which can give their pages back at
    every free: those of 128-256 KiB as mappings of their own, smaller ones when the heap's
    top is trimmed (which depends on the process's heap layout: an installed wheel trimmed
    where the in-place build did not). A warm decode of 20,000 records (columns of 20-180
    KB) faulted in 150-190 of its 356 pages each time, and a 7.5 MB blob ran at 7-14 M
    records/s against 20 M for smaller and larger ones. Columns from 64 KiB are kcbuf's
    now. Measured in a fresh interpreter."""
    faults, pages = _faults_per_call(20, 1000)
    assert max(faults[1:]) < pages // 10, (faults, pages)
