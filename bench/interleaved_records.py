"""R-decode (workload R) of kcodec's compiled twin against aiokafka's compiled records,
interleaved round by round so that load from other work on a shared machine falls on both
sides alike (pytest-benchmark times each row in sequence; here the rows swing together).

    python -m bench.interleaved_records [ROUNDS] [--keep]

Prints, per workload, the median time of each side and the ratio of the medians (and of the
minimums); > 1: kcodec faster. ``--keep`` keeps every record of a batch in a list before
touching them (what ``batch.records()`` does) instead of dropping each one as it goes.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any, Callable

from aiokafka.record import default_records as aio

from bench.conftest import twin
from bench.test_bench_records import _input_v2, _touch

WORKLOADS = [("R-decode none", "none", False), ("R-decode-crc none", "none", True),
             ("R-decode gzip", "gzip", False), ("R-decode snappy", "snappy", False),
             ("R-decode lz4", "lz4", False), ("R-decode zstd", "zstd", False)]


def _sides(validate: bool, keep: bool) -> tuple[Callable[[bytes], Any], Callable[[bytes], Any]]:
    iter_batches = twin("batch", "cython").iter_batches
    wrap = list if keep else iter

    def kcodec(data: bytes) -> None:
        for batch in iter_batches(data, validate_crc=validate):
            _touch(wrap(batch))

    def aiokafka(data: bytes) -> None:
        batch = aio.DefaultRecordBatch(data)
        if validate:
            assert batch.validate_crc()
        _touch(wrap(batch))

    return kcodec, aiokafka


def main(argv: list[str]) -> int:
    keep = "--keep" in argv
    args = [a for a in argv if a != "--keep"]
    rounds = int(args[0]) if args else 200
    gc.disable()
    for name, codec, validate in WORKLOADS:
        data = _input_v2(codec)
        kc, ai = _sides(validate, keep)
        tk: list[float] = []
        ta: list[float] = []
        for i in range(rounds):
            order = ((kc, tk), (ai, ta)) if i % 2 else ((ai, ta), (kc, tk))
            for fn, times in order:
                t0 = time.perf_counter()
                fn(data)
                times.append(time.perf_counter() - t0)
        tk.sort()
        ta.sort()
        m = rounds // 2
        print(f"{name:18} kcodec {tk[m] * 1e6:8.1f} us  aiokafka C {ta[m] * 1e6:8.1f} us  "
              f"ratio {ta[m] / tk[m]:.2f} (min {ta[0] / tk[0]:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
