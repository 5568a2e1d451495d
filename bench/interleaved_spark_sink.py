"""S-sink vs S-read, side by side: the kcodec sink writing N records and the kcodec source
reading N records take turns, on the same Spark session and the same broker, so that load
from other work on the shared machine falls on both alike.

    python -m bench.interleaved_spark_sink [ROUNDS] [--tansu] [--profile] [--kafka-default]

Workload: N rows (KCODEC_BENCH_SPARK_N, default 1,000,000) of a 16-byte key and a 100-byte
value, 4 partitions, lz4, Spark local[2]. The sink writes a cached DataFrame (the rows
made once, so the round times the sink, not Spark making rows) to a fresh topic with the
sink's defaults (acks=all, idempotent; see the README's "Sink" section) plus
``kafka.compression.type=lz4``; the source counts a topic of the same N records
(``count()``). The broker is kcodec's own (``kcodec broker``, a process of its own; memory
storage), or Tansu with ``--tansu``. Each timed write is checked: the topic's end offsets
add up to N.

Prints the median and minimum of each, in records/s, and the sink's speed over the
source's (the target: at least 0.5x). ``--kafka-default`` adds a third contender: the sink
with ``kafka.batch.size=16384`` (Kafka's default, the sink's before it chose its own). ``--profile`` adds one sink round under cProfile in
the Python worker (the top of the profile goes to stderr: where a sink task's time goes).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

N = int(os.environ.get("KCODEC_BENCH_SPARK_N", "1000000"))
PARTITIONS = 4
ROOT = Path(__file__).resolve().parent.parent


class _KcodecBroker:
    """``kcodec broker`` in a process of its own (the broker is Python: in the driver's
    process it would share the driver's GIL)."""

    def __init__(self) -> None:
        from kcodec.testing import free_port

        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kcodec", "broker", "--port", str(self.port),
             "--partitions", str(PARTITIONS)], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        from kcodec.client import Admin

        deadline = time.monotonic() + 60
        while True:
            try:
                with Admin(bootstrap_servers=self.bootstrap) as a:
                    a.describe_cluster([])
                return
            except Exception:   # noqa: BLE001 - not up yet
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.3)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _session() -> Any:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("kcodec-bench-sink")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import kcodec.spark

    kcodec.spark.register(s)
    return s


def _rows(spark: Any) -> Any:
    import pyspark.sql.functions as F

    return spark.range(N, numPartitions=PARTITIONS).select(
        F.format_string("%016d", "id").cast("binary").alias("key"),
        F.format_string("%0100d", "id").cast("binary").alias("value"))


def _ends(bootstrap: str, topic: str) -> int:
    from kcodec.client import Admin

    with Admin(bootstrap_servers=bootstrap) as a:
        latest = a.list_offsets([(topic, p) for p in range(PARTITIONS)], "latest")
    return sum(latest.values())


def _create(bootstrap: str, topic: str) -> None:
    from kcodec.client import Admin

    with Admin(bootstrap_servers=bootstrap) as a:
        a.create_topics([topic], num_partitions=PARTITIONS)


def _write(df: Any, bootstrap: str, topic: str, batch_size: int | None = None) -> None:
    w = (df.write.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("kafka.compression.type", "lz4"))
    if batch_size is not None:
        w = w.option("kafka.batch.size", str(batch_size))
    w.mode("append").save()


def main(argv: list[str]) -> None:
    rounds = int(next((a for a in argv if a.isdigit()), "5"))
    if "--tansu" in argv:
        from kcodec.testing.tansu import Tansu

        broker: Any = Tansu().__enter__()
        name = "Tansu"
    else:
        broker = _KcodecBroker()
        name = "kcodec broker (its own process)"
    spark = _session()
    try:
        bs = broker.bootstrap
        rows = _rows(spark).cache()
        rows.count()
        source_topic = f"bench-sink-src-{uuid.uuid4().hex[:6]}"
        _create(bs, source_topic)
        _write(rows, bs, source_topic)
        if name == "Tansu":     # its ListOffsets LATEST is wrong after a multi-record batch
            from kcodec.client import Producer

            with Producer(bootstrap_servers=bs) as p:
                for part in range(PARTITIONS):
                    p.send(source_topic, b"end", partition=part).result(60)
        src = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bs)
               .option("subscribe", source_topic).load())
        want = src.count()      # warm-up round of each
        _write(rows, bs, f"bench-sink-warm-{uuid.uuid4().hex[:6]}")
        times: dict[str, list[float]] = {"source count()": [], "sink write": []}
        if "--kafka-default" in argv:
            times["sink, batch 16 KiB"] = []
        for i in range(rounds):
            order = list(times) if i % 2 == 0 else list(reversed(times))
            for who in order:
                t = time.perf_counter()
                if who.startswith("sink"):
                    topic = f"bench-sink-{i}-{uuid.uuid4().hex[:6]}"
                    _create(bs, topic)
                    t = time.perf_counter()
                    _write(rows, bs, topic, 16384 if "16 KiB" in who else None)
                    dt = time.perf_counter() - t
                    if name != "Tansu":
                        got = _ends(bs, topic)
                        assert got == N, (topic, got, N)
                else:
                    got = src.count()
                    dt = time.perf_counter() - t
                    assert got == want, (got, want)
                times[who].append(dt)
        print(f"\nS-sink vs S-read ({N} records, 16 B key + 100 B value, lz4, {PARTITIONS} "
              f"partitions, local[2], {name}, {rounds} rounds interleaved)")
        for who, ts in times.items():
            print(f"  {who:18} median {statistics.median(ts):7.3f} s "
                  f"({N / statistics.median(ts) / 1e6:5.2f} M rec/s)  min {min(ts):7.3f} s")
        med = {k: statistics.median(v) for k, v in times.items()}
        low = {k: min(v) for k, v in times.items()}
        for who in times:
            if who.startswith("sink"):
                print(f"  {who} / source speed: {med['source count()'] / med[who]:.2f}x by "
                      f"medians, {low['source count()'] / low[who]:.2f}x by minimums")
        if "--profile" in argv:
            _profile(spark, rows, bs)
        rows.unpersist()
    finally:
        spark.stop()
        if name == "Tansu":
            broker.__exit__(None, None, None)
        else:
            broker.stop()


def _profile(spark: Any, rows: Any, bs: str) -> None:
    """One sink round with the Python workers under cProfile (Spark's own profiler for
    Python workers: spark.python.profile is per session, so a session of its own)."""
    import cProfile
    import pstats

    from kcodec.spark.options import parse_sink
    from kcodec.spark.sink import write_batches

    topic = f"bench-sink-prof-{uuid.uuid4().hex[:6]}"
    _create(bs, topic)
    # the task's own work, in this process: the same Arrow batches a task gets
    batches = rows.limit(N // PARTITIONS).toArrow().to_batches(max_chunksize=10_000)
    opts = parse_sink({"kafka.bootstrap.servers": bs, "topic": topic,
                       "kafka.compression.type": "lz4"})
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.runcall(write_batches, opts, iter(batches))
    dt = time.perf_counter() - t
    print(f"\none task's work ({N // PARTITIONS} rows) in the driver's Python under cProfile: "
          f"{dt:.2f} s", file=sys.stderr)
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main(sys.argv[1:])
