"""A/B of the broker: another checkout's ``kcodec broker`` against this one's, the workloads of
bench/test_bench_broker.py (B-produce: confluent-kafka, acks=all, lz4, idempotent; B-consume:
confluent-kafka reads them back), the brokers taking turns round by round with the order
alternating, so that load from other work on a shared machine falls on both sides alike.

    python -m bench.ab_broker BASE_CHECKOUT [ROUNDS] [--disk]   # KCODEC_BENCH_BROKER_RECORDS

The other checkout must have its extension built (``python setup.py build_ext --inplace``).
Each side's broker runs from its own checkout (its directory first on ``PYTHONPATH``), one
process each, started once and kept for every round; a fresh topic a round. Prints each
side's median and minimum seconds per workload and this/base (below 1: this broker is
faster).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from bench import test_bench_broker as b
from tests.support import REPO


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    disk = "--disk" in sys.argv
    base = os.path.abspath(args[0])
    rounds = int(args[1]) if len(args) > 1 else 5
    sides = {"base": base, "this": str(REPO)}
    brokers = {s: b.KcodecBrokerProcess(disk, root) for s, root in sides.items()}
    res: dict[tuple[str, str], list[float]] = {(s, w): [] for s in sides
                                               for w in ("produce", "consume")}
    try:
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for s in order:
                boot = brokers[s].bootstrap
                topic = b._topic(boot)
                t0 = time.perf_counter()
                b.produce(boot, topic)
                res[(s, "produce")].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                b.consume(boot, topic)
                res[(s, "consume")].append(time.perf_counter() - t0)
            print(f"round {r}: " + ", ".join(f"{s} {w} {v[-1]:.3f}s"
                                             for (s, w), v in res.items()), flush=True)
    finally:
        for br in brokers.values():
            br.stop()
    for w in ("produce", "consume"):
        bb, t = res[("base", w)], res[("this", w)]
        print(f"{w} (N={b.N}, {'disk' if disk else 'memory'}): base median "
              f"{statistics.median(bb):.3f}s min {min(bb):.3f}s; this median "
              f"{statistics.median(t):.3f}s min {min(t):.3f}s; this/base median "
              f"{statistics.median(t) / statistics.median(bb):.3f} min {min(t) / min(bb):.3f}")


if __name__ == "__main__":
    main()
