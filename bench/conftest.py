"""Shared helpers for the benchmarks (pytest-benchmark; never part of the test run).

* Seeded workload data as ../shared/reference/workloads.md defines it: ``crc_buffer()``
  (C-crc32c, C-crc32), ``varlong_values()`` (C-varint), ``workload_records()`` (R-*).
* ``ratios``: a session fixture. After ``benchmark(...)`` ran, call
  ``ratios.add(workload, name, benchmark, amount=..., unit=...)``; at the end of the run a
  table per workload prints each entry's median, throughput and the speed ratio of kcodec
  (the ``kcodec cython`` entry, or ``kcodec python`` in a pure run) to it. Absolute times
  on shared machines are noise; ratios measured side by side in one run are not.
  With KCODEC_BENCH_JSON=path the rows are also appended there as JSON lines.
* ``twin(name, impl)``: a module of one implementation, skipping compiled ones when the
  extension is not built.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kcodec import _impl

SEED = 20_240_601
MiB = 1 << 20
IMPLS = _impl.twins()


def rng(tag: str) -> random.Random:
    """A generator seeded from SEED and a workload tag (str seeds are stable across runs)."""
    return random.Random(f"{SEED}:{tag}")


def twin(name: str, impl: str) -> Any:
    if impl not in IMPLS:
        pytest.skip(f"{impl} twin not available in this run")
    return _impl.twin(name, impl)


# -- workload data ------------------------------------------------------------------------

def crc_buffer(size: int = MiB) -> bytes:
    """C-crc32c / C-crc32: one seeded buffer of random bytes (1 MiB)."""
    return rng("crc").randbytes(size)


def varlong_values(n: int = 1_000_000) -> list[int]:
    """C-varint: n signed 64-bit values whose zigzag varlongs are 1..10 bytes, evenly spread."""
    r = rng("varint")
    out = []
    for _ in range(n):
        nbytes = r.randint(1, 10)
        lo = 0 if nbytes == 1 else 1 << (7 * (nbytes - 1))
        zz = r.randrange(lo, 1 << min(7 * nbytes, 64))
        out.append((zz >> 1) ^ -(zz & 1))
    return out


@dataclass
class WorkloadRecord:
    offset: int
    timestamp: int
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def workload_records(n: int = 1000) -> list[WorkloadRecord]:
    """R-*: offsets 0..n-1, timestamps 1.7e12 + i ms, 16-byte hex key, 100-byte JSON-like
    value ending in random hex, 2 headers of a 4-character str key and a 6-byte value."""
    r = rng("records")
    out = []
    for i in range(n):
        key = r.randbytes(8).hex().encode()
        head = b'{"id": %d, "user": "u%05d", "event": "click", "tag": "' % (i, i % 99991)
        value = (head + r.randbytes(50).hex().encode())[:100]
        headers = [
            ("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4)), r.randbytes(6)),
            ("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4)), r.randbytes(6)),
        ]
        out.append(WorkloadRecord(i, 1_700_000_000_000 + i, key, value, headers))
    return out


# -- ratios -------------------------------------------------------------------------------

@dataclass
class Row:
    workload: str
    name: str
    median: float
    min: float
    amount: float | None
    unit: str | None


class Ratios:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, workload: str, name: str, benchmark: Any, amount: float | None = None,
            unit: str | None = None) -> None:
        stats = getattr(benchmark, "stats", None)
        if stats is None:  # --benchmark-disable: nothing was timed
            return
        inner = getattr(stats, "stats", stats)
        self.rows.append(Row(workload, name, float(inner.median), float(getattr(inner, "min", inner.median)), amount, unit))

    def subject(self, rows: list[Row]) -> Row | None:
        for wanted in ("kcodec cython", "kcodec python"):
            for row in rows:
                if row.name == wanted:
                    return row
        return None

    def report(self) -> list[str]:
        lines: list[str] = []
        by_workload: dict[str, list[Row]] = {}
        for row in self.rows:
            by_workload.setdefault(row.workload, []).append(row)
        for workload, rows in by_workload.items():
            subject = self.subject(rows)
            lines.append("")
            who = subject.name if subject else "kcodec"
            lines.append(f"{workload}  (ratio = speed of {who} / speed of the row; by medians,"
                         " and by minimums, which load on a shared machine disturbs least)")
            lines.append(f"  {'name':<34} {'median':>12} {'throughput':>14} {'ratio':>8}"
                         f" {'min':>12} {'ratio(min)':>11}")
            for row in rows:
                thr = _throughput(row)
                ratio = f"{row.median / subject.median:8.2f}" if subject else "       -"
                rmin = f"{row.min / subject.min:11.2f}" if subject else "          -"
                lines.append(f"  {row.name:<34} {_fmt_time(row.median):>12} {thr:>14} {ratio}"
                             f" {_fmt_time(row.min):>12} {rmin}")
        return lines


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.3f} ns"


def _throughput(row: Row) -> str:
    if not row.amount or row.median <= 0:
        return "-"
    per_s = row.amount / row.median
    if row.unit == "B":
        return f"{per_s / 1e9:.2f} GB/s" if per_s >= 1e9 else f"{per_s / 1e6:.2f} MB/s"
    return f"{per_s / 1e6:.2f} M {row.unit or 'ops'}/s"


_RATIOS = Ratios()


@pytest.fixture(scope="session")
def ratios() -> Ratios:
    return _RATIOS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RATIOS.rows:
        return
    terminalreporter.section("kcodec ratios")
    for line in _RATIOS.report():
        terminalreporter.write_line(line)
    path = os.environ.get("KCODEC_BENCH_JSON")
    if path:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(path, "a", encoding="utf-8") as f:
            for row in _RATIOS.rows:
                f.write(json.dumps({"time": stamp, **row.__dict__}) + "\n")
