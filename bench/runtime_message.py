"""Per-record cost of a runtime store's chunk codec (kcodec._py.msgcols and its compiled
twin): ``encode_many`` and ``decode_many`` of batches of 500 messages, µs a record, best of
7 runs, each run the mean of enough calls to last ~0.2 s.

    python -m bench.runtime_message [--runs 7] [--size 500]

Workloads: ``plain`` is the runtime benchmark's (one topic, 16-byte key, 100-byte value, no
headers, no error); ``headers`` adds two headers a message (one with a null value) and an
error text on every tenth. Both twins run in one process; the ratio is pure / compiled.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from kcodec import _impl
from kcodec.runtime.message import Message


def batch(size: int, headers: bool) -> list[Message]:
    out = []
    for i in range(size):
        hdrs = [("trace-id", b"%016x" % i), ("retry", None)] if headers else []
        err = "handler failed: boom" if headers and i % 10 == 0 else None
        out.append(Message("orders", i % 12, 1_000_000 + i, 1_733_400_000_000 + i, 0,
                           b"key-%012d" % i, bytes(100), hdrs, 0, err, 0))
    return out


def per_record(fn: Any, arg: Any, size: int, runs: int) -> float:
    """Best of ``runs`` means, µs a record."""
    calls = 1
    while True:                                  # calls a run: ~0.2 s
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(arg)
        if time.perf_counter() - t0 > 0.05:
            break
        calls *= 2
    calls *= 4
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(arg)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best / size * 1e6


def main() -> None:
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 7
    size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 500
    impls = _impl.twins()
    print(f"{size} messages a batch, best of {runs}; µs a record")
    print(f"{'workload':<9} {'step':<7} " + " ".join(f"{i:>8}" for i in impls)
          + ("   pure/compiled" if len(impls) == 2 else ""))
    for name, hdrs in (("plain", False), ("headers", True)):
        msgs = batch(size, hdrs)
        blob = _impl.twin("msgcols", "python").encode_many(msgs)
        for step in ("encode", "decode"):
            got = []
            for impl in impls:
                mod = _impl.twin("msgcols", impl)
                if step == "encode":
                    got.append(per_record(mod.encode_many, msgs, size, runs))
                else:
                    got.append(per_record(lambda b, m=mod: m.decode_many(b, Message), blob,
                                          size, runs))
            ratio = f"   {got[-1] / got[0]:>8.1f}x" if len(got) == 2 else ""
            print(f"{name:<9} {step:<7} " + " ".join(f"{g:>8.3f}" for g in got) + ratio)


if __name__ == "__main__":
    main()
