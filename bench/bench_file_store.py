"""The file store alone, between two processes: records/s from the first append to the
last ack.

Workload: a writer process appends CHUNKS chunks of 500 messages of a 16-byte key and a
100-byte value (``append_batches`` of 4 chunks, as a puller appends), while a reader
process claims and acks them (``claim(500)`` then ``ack(claim, claim.refs)``, as a sinker
with a no-op handler) until all are acked; the clock runs from the writer's first append
to the reader's last ack. It measures whichever ``kcodec`` is on ``PYTHONPATH``, so one
copy of this file compares two trees::

    PYTHONPATH=/path/to/tree python bench/bench_file_store.py [--fsync always] [--chunks 400]

Not part of the test run; the numbers go into the commits that change the store.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from typing import Any

BATCH = 500


def _messages(n: int, start: int) -> list:
    from kcodec.runtime.message import Message

    v = b"v" * 100
    return [Message("t", i % 4, i, 1_700_000_000_000 + i, 0, b"%016d" % i, v, [])
            for i in range(start, start + n)]


def _write(path: str, fsync: str, chunks: int, t0: Any) -> None:
    from kcodec.runtime.storage.file import FileStore

    s = FileStore(path, "p0", fsync)
    batches = [_messages(BATCH, i * BATCH) for i in range(chunks)]
    t0.value = time.time()
    for i in range(0, chunks, 4):
        s.append_batches(batches[i:i + 4])
        if s.needs_sync():
            s.sync()
    s.sync()
    s.close()


def _read(path: str, fsync: str, total: int, t1: Any) -> None:
    from kcodec.runtime.storage.file import FileStore

    s = FileStore(path, "s0", fsync)
    n = 0
    while n < total:
        c = s.claim(BATCH)
        if c is None:
            time.sleep(0.001)
            continue
        n += len(c.messages)
        s.ack(c, c.refs)
    t1.value = time.time()
    s.close()


def run(fsync: str, chunks: int) -> float:
    """Records/s of one round."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("KCODEC_BENCH_DIR")) as d:
        path = os.path.join(d, "store")
        from kcodec.runtime.storage.file import FileStore

        FileStore(path, "setup", fsync).close()
        ctx = mp.get_context("spawn")
        t0, t1 = ctx.Value("d", 0.0), ctx.Value("d", 0.0)
        r = ctx.Process(target=_read, args=(path, fsync, chunks * BATCH, t1))
        w = ctx.Process(target=_write, args=(path, fsync, chunks, t0))
        r.start()
        w.start()
        w.join()
        r.join()
        return chunks * BATCH / (t1.value - t0.value)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsync", default="always")
    ap.add_argument("--chunks", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    rates = sorted(run(a.fsync, a.chunks) for _ in range(a.rounds))
    print(f"fsync={a.fsync} chunks={a.chunks}x{BATCH}: median {rates[len(rates) // 2]:,.0f} "
          f"rec/s (rounds: {', '.join(f'{r:,.0f}' for r in rates)}; load "
          f"{os.getloadavg()[0]:.2f})")
