"""Handlers for bench/test_bench_runtime.py, imported by the runtime's processes (and by the
peers' apps): do nothing with the records, but count them into a file per process, so the
benchmark sees when every record was handled without asking the broker.

Each process writes ``<dir>/<pid>``: "<first record's time> <count> <last record's time>",
at most every 50 ms, from a thread, and whenever the count reaches the expected total
(``KCODEC_BENCH_COUNT_DIR``, ``KCODEC_BENCH_TOTAL``). The times are those of the handler
calls, not of the writes: a process that handles part of the records never reaches the
total, and its last write can come up to 100 ms after its last record.
"""

from __future__ import annotations

import os
import threading
import time

_DIR = os.environ.get("KCODEC_BENCH_COUNT_DIR", "")
_TOTAL = int(os.environ.get("KCODEC_BENCH_TOTAL", "0") or 0)
_state = {"n": 0, "first": 0.0, "last": 0.0, "written": 0.0}


def _flusher() -> None:
    """Writes the count every 50 ms: a process that handles part of the records never
    reaches the total itself, and its last records must be counted too."""
    last = -1
    while True:
        time.sleep(0.05)
        if _state["n"] != last:
            last = _state["n"]
            _state["written"] = 0.0
            count(0)


def count(n: int) -> None:
    st = _state
    now = time.time()
    if not st["first"]:
        if not n:
            return
        st["first"] = now
        threading.Thread(target=_flusher, daemon=True).start()
    if n:
        st["n"] += n
        st["last"] = now
    if _DIR and (now - st["written"] > 0.05 or st["n"] >= _TOTAL):
        st["written"] = now
        tmp = os.path.join(_DIR, f".{os.getpid()}.{threading.get_ident()}")
        with open(tmp, "w") as f:
            f.write(f"{st['first']} {st['n']} {st['last']}")
        os.replace(tmp, os.path.join(_DIR, str(os.getpid())))


def noop(records: list) -> list[bool]:
    """kcodec run's no-op handler: every record done."""
    count(len(records))
    return [True] * len(records)


def flush() -> None:
    """Write the count now (the peers call this from a timer)."""
    st = _state
    st["written"] = 0.0
    count(0)


def busy(records: list) -> list[bool]:
    """CPU work in Python, about 10 us a record (summing the value's bytes ten times), so
    the handler and not the broker bounds the rate: how pullers scale over cores."""
    for r in records:
        v = r.value
        for _ in range(10):
            sum(v)
    count(len(records))
    return [True] * len(records)


def waiting(records: list) -> list[bool]:
    """An I/O-bound handler: waits 20 ms a batch (a database round trip, say), using no
    CPU meanwhile, so each puller is bounded by its handler's waits and two should give
    about twice one's rate (the issue's ">= 1.6x with a handler that is not CPU bound")."""
    time.sleep(0.02)
    count(len(records))
    return [True] * len(records)
