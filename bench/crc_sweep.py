"""C-crc32c sweep: kcodec's compiled CRC-32C against the ``crc32c`` package over start
offsets and sizes, interleaved call by call so that load from other work on a shared machine
falls on both sides alike.

    python -m bench.crc_sweep [--offsets 0,1,3,8] [--sizes 64,1K,...] [--budget SECONDS]

Every buffer is a memoryview slice of one bytes object (the way a batch inside a fetch
response or a segment is checked), starting ``offset`` bytes after an 8-byte boundary
(CPython's bytes payload sits at a fixed offset from an aligned allocation, so the offset is
made relative to the real address). Per (offset, size) it prints the median time per call
of each side and the ratio of the medians (and minimums): crc32c-package time ÷ kcodec
time, so above 1 kcodec is faster. Each sample is a batch of calls long enough (~2 ms) for
the timer, and the sides alternate sample by sample.
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import crc32c as crc32c_package

from bench.conftest import crc_buffer, twin

KiB = 1 << 10
MiB = 1 << 20
OFFSETS = [0, 1, 3, 8]
SIZES = [64, 256, KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB]


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, mult in (("MIB", MiB), ("KIB", KiB), ("M", MiB), ("K", KiB)):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * mult
    return int(text)


def _fmt_size(n: int) -> str:
    if n >= MiB:
        return f"{n // MiB} MiB"
    if n >= KiB:
        return f"{n // KiB} KiB"
    return f"{n} B"


def aligned_views(blob: bytes, size: int, offsets: list[int]) -> dict[int, memoryview]:
    """``size``-byte views of ``blob`` starting ``offset`` bytes after an 8-byte boundary."""
    base = ctypes.cast(ctypes.c_char_p(blob), ctypes.c_void_p).value or 0
    lead = (-base) % 8
    view = memoryview(blob)
    return {off: view[lead + off: lead + off + size] for off in offsets}


def _calls_per_sample(fn: Callable[[Any], int], buf: Any, target_s: float = 0.002) -> int:
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(buf)
        dt = time.perf_counter() - t0
        if dt >= target_s / 4 or n >= 1 << 20:
            return max(1, int(n * target_s / max(dt, 1e-9)))
        n *= 4


def measure(kc: Callable[[Any], int], peer: Callable[[Any], int], buf: Any,
            budget_s: float) -> tuple[float, float, float, float]:
    """(kcodec median, peer median, kcodec min, peer min), seconds per call."""
    assert kc(buf) == peer(buf)
    calls = _calls_per_sample(kc, buf)
    tk: list[float] = []
    tp: list[float] = []
    deadline = time.perf_counter() + budget_s
    i = 0
    while i < 6 or (time.perf_counter() < deadline and i < 400):
        order = ((kc, tk), (peer, tp)) if i % 2 else ((peer, tp), (kc, tk))
        for fn, times in order:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(buf)
            times.append((time.perf_counter() - t0) / calls)
        i += 1
    return statistics.median(tk), statistics.median(tp), min(tk), min(tp)


def main(argv: list[str]) -> int:
    offsets, sizes, budget = OFFSETS, SIZES, 1.0
    it = iter(argv)
    for arg in it:
        if arg == "--offsets":
            offsets = [int(x) for x in next(it).split(",")]
        elif arg == "--sizes":
            sizes = [_parse_size(x) for x in next(it).split(",")]
        elif arg == "--budget":
            budget = float(next(it))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    crc = twin("crc", "cython")
    kc, peer = crc.crc32c, crc32c_package.crc32c
    print(f"kcodec backend {crc.CRC32C_BACKEND}; crc32c package {crc32c_package.__version__}"
          f" (hardware: {getattr(crc32c_package, 'hardware_based', '?')})")
    print(f"{'size':>8} {'off':>3} {'kcodec':>11} {'crc32c pkg':>11} {'ratio':>6} {'(min)':>6}")
    blob = crc_buffer(max(sizes) + 64)
    gc.disable()
    worst = float("inf")
    for size in sizes:
        views = aligned_views(blob, size, offsets)
        for off in offsets:
            mk, mp, nk, np_ = measure(kc, peer, views[off], budget)
            ratio = mp / mk
            worst = min(worst, ratio)
            print(f"{_fmt_size(size):>8} {off:>3} {size / mk / 1e9:7.2f} GB/s {size / mp / 1e9:7.2f}"
                  f" GB/s {ratio:6.2f} {np_ / nk:6.2f}", flush=True)
    print(f"lowest ratio of medians: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
