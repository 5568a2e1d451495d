"""S-read interleaved: the kcodec source, the memory floor and (unless
``--no-confluent``) the confluent-kafka source take turns query by query, so that load from
other work on the shared machine falls on all of them alike.

    python -m bench.interleaved_spark [ROUNDS] [--no-confluent] [-q count|group]

Uses the fixtures of ``bench/test_bench_spark.py`` (KCODEC_BENCH_SPARK_N records, 4
partitions, lz4, Spark local[2], the Tansu broker). Prints per query the median and minimum
of each source and kcodec's speed over each other source's (> 1: kcodec faster), by
medians and by minimums.
"""

from __future__ import annotations

import statistics
import sys
import time

from bench import test_bench_spark as B


def _fixture(f, *args):
    gen = f.__wrapped__(*args)
    return gen, next(gen)


def main(argv: list[str]) -> None:
    rounds = int(next((a for a in argv if a.isdigit()), "5"))
    sources = dict(B.SOURCES)
    if "--no-confluent" in argv:
        sources.pop("confluent-kafka source")
    queries = dict(B.QUERIES)
    if "-q" in argv:
        want = argv[argv.index("-q") + 1]
        queries = {k: v for k, v in queries.items() if k.startswith(want[:5])}
    sgen, spark = _fixture(B.spark)
    bgen, broker = _fixture(B.broker)
    try:
        filled = B.filled.__wrapped__(broker)
        total = sum(filled.values())
        for qname, q in queries.items():
            times: dict[str, list[float]] = {k: [] for k in sources}
            dfs = {k: f(spark, broker, filled) for k, f in sources.items()}
            for df in dfs.values():     # a warm-up round each
                q(df)
            for i in range(rounds):
                order = list(dfs) if i % 2 == 0 else list(reversed(dfs))
                for k in order:
                    t = time.perf_counter()
                    out = q(dfs[k])
                    times[k].append(time.perf_counter() - t)
                    n = out if isinstance(out, int) else sum(r["count"] for r in out)
                    assert n == total, (k, n, total)
            med = {k: statistics.median(v) for k, v in times.items()}
            low = {k: min(v) for k, v in times.items()}
            kc = "kcodec cython"
            print(f"\nS-read {qname} ({total} records, {rounds} rounds interleaved)")
            for k in sources:
                print(f"  {k:24} median {med[k]:7.3f} s  min {low[k]:7.3f} s  "
                      f"kcodec / this: {med[k] / med[kc]:5.2f}x (min {low[k] / low[kc]:5.2f}x)")
    finally:
        for g in (bgen, sgen):
            try:
                next(g)
            except StopIteration:
                pass


if __name__ == "__main__":
    main(sys.argv[1:])
