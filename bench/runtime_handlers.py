"""Handlers for bench/test_bench_runtime.py, imported by the runtime's processes (and by the
peers' apps): do nothing with the records, but count them into a file per process, so the
benchmark sees when every record was handled without asking the broker.

Each process writes ``<dir>/<pid>``: "<first record's time> <count>", at most every 50 ms
and whenever the count reaches the expected total (``KCODEC_BENCH_COUNT_DIR``,
``KCODEC_BENCH_TOTAL``).
"""

from __future__ import annotations

import os
import threading
import time

_DIR = os.environ.get("KCODEC_BENCH_COUNT_DIR", "")
_TOTAL = int(os.environ.get("KCODEC_BENCH_TOTAL", "0") or 0)
_state = {"n": 0, "first": 0.0, "written": 0.0}


def count(n: int) -> None:
    st = _state
    now = time.time()
    if not st["first"]:
        if not n:
            return
        st["first"] = now
    st["n"] += n
    if _DIR and (now - st["written"] > 0.05 or st["n"] >= _TOTAL):
        st["written"] = now
        tmp = os.path.join(_DIR, f".{os.getpid()}.{threading.get_ident()}")
        with open(tmp, "w") as f:
            f.write(f"{st['first']} {st['n']} {now}")
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
