"""The exactly-once sink against the at-least-once sink, side by side: what
``kcodec.deliveryGuarantee=exactly_once`` costs in throughput and in micro-batch latency.

    python -m bench.interleaved_spark_eos [ROUNDS] [--stream-only | --batch-only]

Throughput: N rows (KCODEC_BENCH_SPARK_N, default 1,000,000) of a 16-byte key and a
100-byte value, a cached DataFrame of 4 partitions, written with ``df.write`` to a fresh
4-partition topic, lz4, Spark local[2], the two sinks taking turns (so load from other work
on the shared machine falls on both alike); each timed write is checked: the topic holds
the N records and no transaction is left open. Target: exactly once
at >= 0.7x the at-least-once speed.

Micro-batch latency: a streaming copy of a 4-partition topic, ``maxOffsetsPerTrigger``
KCODEC_BENCH_EOS_BATCH (default 20,000) records per micro-batch, each sink in turn; the
``addBatch`` time Spark reports per micro-batch (tasks' write, prepare and the driver's
commit), median and p90 over the batches after each query's first; the sinks run in the
order A, B, B, A.

The broker is kcodec's (two-phase commit on), in a process of its own.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

N = int(os.environ.get("KCODEC_BENCH_SPARK_N", "1000000"))
PER_BATCH = int(os.environ.get("KCODEC_BENCH_EOS_BATCH", "20000"))
PARTITIONS = 4
ROOT = Path(__file__).resolve().parent.parent
SINKS = ("at_least_once", "exactly_once")

_BROKER = """
import sys, time
from kcodec.broker import Cluster
c = Cluster(ports=[int(sys.argv[1])], num_partitions=4,
            transaction_two_phase_commit_enable=True).start()
print("up", flush=True)
sys.stdin.read()
c.stop()
"""


class _Broker:
    def __init__(self) -> None:
        from kcodec.testing import free_port

        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        self.proc = subprocess.Popen([sys.executable, "-c", _BROKER, str(port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=ROOT, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "up"

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def _session() -> Any:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("kcodec-bench-eos")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
         .config("spark.sql.streaming.pollingDelay", "50ms")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import kcodec.spark

    kcodec.spark.register(s)
    return s


def _create(bootstrap: str, topic: str) -> None:
    from kcodec.client import Admin

    with Admin(bootstrap_servers=bootstrap) as a:
        a.create_topics([topic], num_partitions=PARTITIONS)


def _checked(bootstrap: str, topic: str) -> None:
    """N records written (markers and control batches besides), no transaction left open."""
    from kcodec.client import Admin

    with Admin(bootstrap_servers=bootstrap) as a:
        ends = a.list_offsets([(topic, p) for p in range(PARTITIONS)], "latest")
        assert sum(ends.values()) >= N, (topic, ends, N)
        assert not a.list_transactions(states=["Ongoing"]), "a transaction was left open"


def _write(df: Any, bootstrap: str, topic: str, guarantee: str) -> None:
    (df.write.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("kafka.compression.type", "lz4")
     .option("kcodec.deliveryGuarantee", guarantee).mode("append").save())


def throughput(spark: Any, bs: str, rounds: int) -> dict[str, list[float]]:
    import pyspark.sql.functions as F

    rows = spark.range(N, numPartitions=PARTITIONS).select(
        F.format_string("%016d", "id").cast("binary").alias("key"),
        F.format_string("%0100d", "id").cast("binary").alias("value")).cache()
    rows.count()
    for g in SINKS:     # warm-up
        t = f"eos-warm-{uuid.uuid4().hex[:6]}"
        _create(bs, t)
        _write(rows, bs, t, g)
    times: dict[str, list[float]] = {g: [] for g in SINKS}
    for i in range(rounds):
        for g in (SINKS if i % 2 == 0 else tuple(reversed(SINKS))):
            topic = f"eos-{g}-{i}-{uuid.uuid4().hex[:6]}"
            _create(bs, topic)
            t = time.perf_counter()
            _write(rows, bs, topic, g)
            times[g].append(time.perf_counter() - t)
            _checked(bs, topic)
    rows.unpersist()
    return times


def latency(spark: Any, bs: str, batches: int = 6) -> dict[str, list[float]]:
    from kcodec.client import Producer

    src = f"eos-src-{uuid.uuid4().hex[:6]}"
    _create(bs, src)
    total = PER_BATCH * batches
    with Producer(bootstrap_servers=bs, linger_ms=5, compression_type="lz4") as p:
        for i in range(total):
            p.send(src, b"%0100d" % i, key=b"%016d" % i, partition=i % PARTITIONS)
        p.flush(120)
    out: dict[str, list[float]] = {g: [] for g in SINKS}
    for g in SINKS + tuple(reversed(SINKS)):     # each first once: warm-up falls on both
        dst = f"eos-dst-{g}-{uuid.uuid4().hex[:6]}"
        _create(bs, dst)
        with tempfile.TemporaryDirectory() as ck:
            q = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", bs)
                 .option("subscribe", src).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", str(PER_BATCH)).load()
                 .select("key", "value").writeStream.format("kcodec")
                 .option("kafka.bootstrap.servers", bs).option("topic", dst)
                 .option("kcodec.deliveryGuarantee", g).option("checkpointLocation", ck)
                 .trigger(processingTime="0 seconds").start())
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                done = sum(p["numInputRows"] for p in q.recentProgress)
                if done >= total:
                    break
                time.sleep(0.5)
            progress = list(q.recentProgress)
            q.stop()
        out[g] += [p["durationMs"].get("addBatch", 0) / 1000 for p in progress
                   if p["numInputRows"]][1:]
    return out


def main(argv: list[str]) -> None:
    rounds = int(next((a for a in argv if a.isdigit()), "5"))
    broker = _Broker()
    spark = _session()
    try:
        if "--stream-only" not in argv:
            times = throughput(spark, broker.bootstrap, rounds)
            print(f"\nexactly-once vs at-least-once df.write ({N} records, 16 B key + 100 B "
                  f"value, lz4, {PARTITIONS} partitions, local[2], kcodec broker, {rounds} "
                  "rounds interleaved)")
            for g, ts in times.items():
                print(f"  {g:14} median {statistics.median(ts):7.3f} s "
                      f"({N / statistics.median(ts) / 1e6:5.2f} M rec/s)  min {min(ts):7.3f} s")
            med = {k: statistics.median(v) for k, v in times.items()}
            low = {k: min(v) for k, v in times.items()}
            print(f"  exactly_once / at_least_once speed: "
                  f"{med['at_least_once'] / med['exactly_once']:.2f}x by medians, "
                  f"{low['at_least_once'] / low['exactly_once']:.2f}x by minimums")
        if "--batch-only" not in argv:
            lat = latency(spark, broker.bootstrap)
            print(f"\nmicro-batch addBatch time ({PER_BATCH} records per batch, "
                  f"{PARTITIONS} partitions)")
            for g, ts in lat.items():
                ts = sorted(ts)
                p90 = ts[min(len(ts) - 1, int(len(ts) * 0.9))] if ts else float("nan")
                print(f"  {g:14} median {statistics.median(ts) if ts else float('nan'):6.3f} s"
                      f"  p90 {p90:6.3f} s  ({len(ts)} batches)")
            if lat["at_least_once"] and lat["exactly_once"]:
                print(f"  added by exactly once: "
                      f"{statistics.median(lat['exactly_once']) - statistics.median(lat['at_least_once']):+.3f} s per micro-batch (medians)")
    finally:
        spark.stop()
        broker.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
