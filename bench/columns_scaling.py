"""R-columns at real fetch and segment sizes: ``decode_columns`` (compiled, CRC checked) over
blobs of 1 to ~430 workload-R batches (150 KB to 64 MB), first call in a fresh process and
warm, against aiokafka's compiled R-decode over the same multi-batch blob.

    python -m bench.columns_scaling [--sizes 1,10,50,200,430] [--repeat 5] [--no-peer] [--wall]

Each size runs in its own subprocess, so "first" really is the first call in a process
(numpy imported and one small warm-up call on another blob before it, as any consumer has
done by then); "warm" is the median of the next ``repeat`` calls. Prints records/s of CPU
time (time.process_time: user + system, page faults included; every side is
single-threaded), which load from other work on a shared machine disturbs far less than
wall time; ``--wall`` uses time.perf_counter instead.

Two references show what the memory allows at each size, whatever the decoder: ``copy
GB/s``, a copy of the blob into memory written before (numpy, warm, median), which falls as
the blob outgrows the caches; and ``fresh ms``, writing as many bytes as the columns hold
into memory never written before in the process (4 KiB pages, as the columns get), minus
writing them again: the kernel's price for fresh pages, which a first call pays and a warm
call does not (both measured after the decodes, so they take no pages from them).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

clock = time.process_time

BATCHES = [1, 10, 50, 200, 430]


def _blob(k: int) -> bytes:
    from bench.conftest import workload_records
    from kcodec.records import RecordBatchBuilder

    recs = workload_records()
    parts = []
    for b in range(k):
        builder = RecordBatchBuilder(max_size=1 << 24, base_offset=b * len(recs))
        for r in recs:
            builder.append(r.key, r.value, r.headers, timestamp=r.timestamp)
        parts.append(builder.build())
    return b"".join(parts)


def _child(k: int, repeat: int, peer: bool) -> dict[str, float]:
    from kcodec.records import decode_columns

    blob = _blob(k)
    small = _blob(1)
    n = 1000 * k
    decode_columns(small)            # the module, numpy and the first allocation are set up
    t0 = clock()
    cols = decode_columns(blob)
    first = clock() - t0
    assert len(cols) == n
    del cols
    warm = []
    for _ in range(repeat):
        t0 = clock()
        cols = decode_columns(blob)
        warm.append(clock() - t0)
        del cols
    out = {"batches": k, "bytes": len(blob), "records": n, "first": n / first,
           "warm": n / statistics.median(warm)}
    out.update(_memory(blob, repeat))
    if peer:
        from aiokafka.record.memory_records import MemoryRecords

        times = []
        for _ in range(max(1, repeat // 2)):
            t0 = clock()
            mr = MemoryRecords(blob)
            got = 0
            while True:
                batch = mr.next_batch()
                if batch is None:
                    break
                for r in batch:
                    _ = r.offset, r.timestamp, r.key, r.value
                    for h in r.headers:
                        _ = h[0], h[1]
                    got += 1
            times.append(clock() - t0)
            assert got == n
        out["aiokafka"] = n / statistics.median(times)
    return out


def _column_bytes(blob: bytes) -> int:
    from kcodec.records import decode_columns

    c = decode_columns(blob)
    arrays = [c.offset, c.timestamp, c.timestamp_type]
    for col in (c.key, c.value, c.headers.keys, c.headers.values):
        arrays += [col.offsets, col.data]
    arrays.append(c.headers.offsets)
    return sum(int(a.nbytes) for a in arrays)


def _memory(blob: bytes, repeat: int) -> dict[str, float]:
    """The two references of the module docstring, in the same process after the decodes."""
    import numpy as np

    src = np.frombuffer(blob, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(max(3, repeat)):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    del dst
    size = _column_bytes(blob)
    # 4 KiB pages, as kcbuf's columns get (numpy advises huge pages for its big arrays)
    core = getattr(np, "_core", None) or np.core
    huge = core.multiarray._set_madvise_hugepage(False)
    fresh = np.empty(size, dtype=np.uint8)        # mapped, not yet written
    core.multiarray._set_madvise_hugepage(huge)
    t0 = time.perf_counter()
    fresh.fill(1)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh.fill(2)
    again = time.perf_counter() - t0
    return {"copy": len(blob) / statistics.median(times), "fresh": first - again,
            "column_bytes": size}


def main(argv: list[str]) -> int:
    global clock
    if "--wall" in argv:
        clock = time.perf_counter
    if argv and argv[0] == "--child":
        print(json.dumps(_child(int(argv[1]), int(argv[2]), argv[3] == "1")))
        return 0
    sizes, repeat, peer = BATCHES, 5, True
    it = iter(argv)
    for a in it:
        if a == "--sizes":
            sizes = [int(x) for x in next(it).split(",")]
        elif a == "--repeat":
            repeat = int(next(it))
        elif a == "--no-peer":
            peer = False
    print(f"{'batches':>7} {'MB':>6} {'first M rec/s':>14} {'warm M rec/s':>13}"
          f" {'first/warm':>10} {'aiokafka M rec/s':>17} {'warm/aiokafka':>13}"
          f" {'copy GB/s':>9} {'warm ms':>8} {'fresh ms':>8}")
    rows = []
    for k in sizes:
        cmd = [sys.executable, "-m", "bench.columns_scaling", "--child", str(k), str(repeat),
               "1" if peer else "0"] + (["--wall"] if clock is time.perf_counter else [])
        out = subprocess.run(cmd, capture_output=True, text=True,
                             check=True, env=dict(os.environ))
        r = json.loads(out.stdout)
        rows.append(r)
        aio = r.get("aiokafka")
        print(f"{k:>7} {r['bytes'] / 1e6:6.1f} {r['first'] / 1e6:14.2f} {r['warm'] / 1e6:13.2f}"
              f" {r['first'] / r['warm']:10.2f} {aio / 1e6 if aio else float('nan'):17.2f}"
              f" {r['warm'] / aio if aio else float('nan'):13.1f}"
              f" {r['copy'] / 1e9:9.1f} {r['records'] / r['warm'] * 1e3:8.2f}"
              f" {r['fresh'] * 1e3:8.2f}", flush=True)
    if len(rows) > 1:
        print(f"largest / smallest (warm): {rows[-1]['warm'] / rows[0]['warm']:.2f};"
              f" the same for the copy: {rows[-1]['copy'] / rows[0]['copy']:.2f}")
        print("best first/warm the fresh pages allow, warm / (warm + fresh): "
              + ", ".join(f"{1 / (1 + r['fresh'] * r['warm'] / r['records']):.2f}"
                          for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
