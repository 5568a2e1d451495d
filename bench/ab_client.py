"""A/B of the client: another checkout's producer and consumer against this one's, workload
E of bench/test_bench_client.py (``kcodec_produce`` and ``kcodec_consume``), each run in a
child process of its own checkout, round by round with the order alternating, on one Tansu
broker, so that load from other work on a shared machine falls on both sides alike.

    python -m bench.ab_client BASE_CHECKOUT [ROUNDS]     # KCODEC_BENCH_E_RECORDS=200000

The other checkout must have its extension built (``python setup.py build_ext --inplace``).
Prints each side's median and minimum wall time per workload, and this/base (below 1: this
checkout is faster).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import uuid

from kcodec.client import Admin, NewTopic
from kcodec.testing.tansu import Tansu
from tests.support import REPO

CHILD = """
import os, sys, time
root = sys.argv[1]
sys.path.insert(0, root)
os.chdir(root)
import kcodec
assert kcodec.__file__.startswith(root), kcodec.__file__
from bench import test_bench_client as b
t = time.perf_counter()
if sys.argv[4] == "produce":
    b.kcodec_produce(sys.argv[2], sys.argv[3], "none")
else:
    b.kcodec_consume(sys.argv[2], sys.argv[3])
print(time.perf_counter() - t)
"""


def main() -> None:
    base = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    sides = {"base": base, "this": str(REPO)}
    env = {**os.environ,
           "KCODEC_BENCH_E_RECORDS": os.environ.get("KCODEC_BENCH_E_RECORDS", "200000")}
    res: dict[tuple[str, str], list[float]] = {(s, w): [] for s in sides
                                               for w in ("produce", "consume")}
    with Tansu() as br, Admin(bootstrap_servers=br.bootstrap) as admin:
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            topics = {s: f"ab-{uuid.uuid4().hex[:8]}" for s in order}
            admin.create_topics([NewTopic(t, 4, 1) for t in topics.values()])
            for w in ("produce", "consume"):
                for s in order:
                    out = subprocess.run([sys.executable, "-c", CHILD, sides[s], br.bootstrap,
                                          topics[s], w], capture_output=True, text=True,
                                         env=env, timeout=600, check=True)
                    res[(s, w)].append(float(out.stdout.split()[-1]))
            print(f"round {r}: " + ", ".join(f"{s} {w} {v[-1]:.3f}s"
                                             for (s, w), v in res.items()), flush=True)
    for w in ("produce", "consume"):
        b, t = res[("base", w)], res[("this", w)]
        print(f"{w} (N={env['KCODEC_BENCH_E_RECORDS']}): base median "
              f"{statistics.median(b):.3f}s min {min(b):.3f}s; this median "
              f"{statistics.median(t):.3f}s min {min(t):.3f}s; this/base median "
              f"{statistics.median(t) / statistics.median(b):.3f} min {min(t) / min(b):.3f}")


if __name__ == "__main__":
    main()
