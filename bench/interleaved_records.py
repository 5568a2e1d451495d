"""R-decode (workload R) of kcodec's compiled twin against aiokafka's compiled records,
interleaved round by round so that load from other work on a shared machine falls on both
sides alike (pytest-benchmark times each row in sequence; here the rows swing together).

    python -m bench.interleaved_records [ROUNDS] [--keep] [--all] [--gc] [-k SUBSTRING]

Prints, per workload, the median time of each side and the ratio of the medians (and of the
minimums); > 1: kcodec faster. ``--keep`` keeps every record of a batch in a list before
touching them (what ``batch.records()`` does) instead of dropping each one as it goes.
``--all`` adds R-build (every codec) and L-decode / L-build (none, gzip, snappy, lz4) against
aiokafka's compiled builders and legacy reader; ``-k`` keeps the workloads whose name
contains SUBSTRING. The cyclic GC is off while timing (its passes land on either side at
random), unless ``--gc``: a consumer keeping its records has the GC on in real life.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from aiokafka.record import default_records as aio

from bench.conftest import twin
from bench.test_bench_records import (
    BUILDERS,
    L_BUILDERS,
    L_DECODERS,
    _input_legacy,
    _input_v2,
    _touch,
)

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


def _more() -> list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[Any, ...]]]:
    """(name, kcodec side, aiokafka side, args) of the build and legacy workloads."""
    out: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[Any, ...]]] = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        out.append((f"R-build {codec}", BUILDERS["kcodec cython"](codec),
                    BUILDERS["aiokafka C"](codec), ()))
    for codec in ("none", "gzip", "snappy", "lz4"):
        data = _input_legacy(codec)
        out.append((f"L-decode {codec}", L_DECODERS["kcodec cython"](),
                    L_DECODERS["aiokafka C"](), (data,)))
        out.append((f"L-build {codec}", L_BUILDERS["kcodec cython"](codec),
                    L_BUILDERS["aiokafka C"](codec), ()))
    return out


def main(argv: list[str]) -> int:
    keep = "--keep" in argv
    every = "--all" in argv
    with_gc = "--gc" in argv
    pick = ""
    if "-k" in argv:
        pick = argv[argv.index("-k") + 1]
        argv = [a for i, a in enumerate(argv) if a != "-k" and (i == 0 or argv[i - 1] != "-k")]
    args = [a for a in argv if a not in ("--keep", "--all", "--gc")]
    rounds = int(args[0]) if args else 200
    if not with_gc:
        gc.disable()
    jobs = [(name, *_sides(validate, keep), (_input_v2(codec),))
            for name, codec, validate in WORKLOADS]
    if every:
        jobs += _more()
    for name, kc, ai, fargs in jobs:
        if pick not in name:
            continue
        tk: list[float] = []
        ta: list[float] = []
        for i in range(rounds):
            order = ((kc, tk), (ai, ta)) if i % 2 else ((ai, ta), (kc, tk))
            for fn, times in order:
                t0 = time.perf_counter()
                fn(*fargs)
                times.append(time.perf_counter() - t0)
        tk.sort()
        ta.sort()
        m = rounds // 2
        print(f"{name:18} kcodec {tk[m] * 1e6:8.1f} us  aiokafka C {ta[m] * 1e6:8.1f} us  "
              f"ratio {ta[m] / tk[m]:.2f} (min {ta[0] / tk[0]:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
