"""Spark benchmarks: the kcodec source and sink against how users do it today.

Workload S-read: N records (default 1,000,000; KCODEC_BENCH_SPARK_N) of a 16-byte key and a
100-byte value, 4 partitions, lz4, written once to the local Tansu broker; Spark local[2].
Each query is ``count()`` and ``groupBy("partition").count()``, through

* ``kcodec cython``: the kcodec source (Arrow batches from ``decode_columns``);
* ``confluent-kafka source``: a Python data source the way users write one today (a
  confluent-kafka Consumer per partition yielding one tuple per record);
* ``memory floor``: the same rows made in memory as Arrow batches (no Kafka): Spark's own
  cost of taking a Python source's Arrow, the floor.

Targets: >= 4x the confluent-kafka source, >= 0.8x the floor.

Workload S-sink: N rows (key, value) written by the kcodec sink vs. a per-row
confluent-kafka Producer sink (``foreachPartition``). Target >= 3x.

Workload S-log: the kcodec-log source over a log directory of about
KCODEC_BENCH_LOG_MB (default 1024) MB of lz4 segments written with kcodec's builder:
rows/s and MB/s of ``count()``.

    python -m pytest bench/test_bench_spark.py --benchmark-only -s
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

N = int(os.environ.get("KCODEC_BENCH_SPARK_N", "1000000"))
LOG_MB = int(os.environ.get("KCODEC_BENCH_LOG_MB", "1024"))
PARTITIONS = 4
ROOT = Path(__file__).resolve().parent.parent
TOPIC = "bench-spark"


@pytest.fixture(scope="module")
def spark():
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("kcodec-bench")
         .config("spark.driver.host", "127.0.0.1")    # loopback only
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    from bench.spark_sources import ConfluentSource, MemorySource

    s.dataSource.register(ConfluentSource)
    s.dataSource.register(MemorySource)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def broker():
    from kcodec.testing.tansu import Tansu

    with Tansu() as b:
        yield b


@pytest.fixture(scope="module")
def filled(broker):
    """The topic with N records, and each partition's end offset (from the producer's
    results: the broker's ListOffsets is not trusted for this)."""
    import pyarrow as pa

    from kcodec.client import Admin, Producer

    with Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([TOPIC], num_partitions=PARTITIONS)
    per = N // PARTITIONS
    ends = {}
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4",
                  batch_size=256 * 1024) as p:
        for part in range(PARTITIONS):
            keys = pa.array([b"%016d" % i for i in range(per)], pa.binary())
            vals = pa.array([b"%0100d" % i for i in range(per)], pa.binary())
            futs = p.send_columns(TOPIC, vals, key=keys,
                                  partition=pa.array([part] * per, pa.int32()))
            p.flush()
            ends[part] = max(f.result(60).offset for f in futs) + 1
        # one single-record batch last, so that ListOffsets LATEST is right on Tansu
        for part in range(PARTITIONS):
            p.send(TOPIC, b"end", partition=part).result(60)
    return {k: v + 1 for k, v in ends.items()}


def _kcodec_df(spark, broker, filled):
    ending = "{" + f'"{TOPIC}": {{' + ", ".join(f'"{p}": {e}' for p, e in filled.items()) \
        + "}}"
    return (spark.read.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", TOPIC).option("endingOffsets", ending).load())


def _confluent_df(spark, broker, filled):
    return (spark.read.format("confluent-bench")
            .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", TOPIC)
            .option("partitions", str(PARTITIONS))
            .option("ends", ",".join(str(filled[p]) for p in range(PARTITIONS))).load())


def _memory_df(spark, broker, filled):
    per = sum(filled.values()) // PARTITIONS
    return (spark.read.format("memory-bench").option("subscribe", TOPIC)
            .option("partitions", str(PARTITIONS)).option("per_partition", str(per)).load())


SOURCES = {"kcodec cython": _kcodec_df, "confluent-kafka source": _confluent_df,
           "memory floor": _memory_df}
QUERIES = {"count": lambda df: df.count(),
           "groupBy(partition).count": lambda df: df.groupBy("partition").count().collect()}


@pytest.mark.parametrize("query", list(QUERIES))
@pytest.mark.parametrize("who", list(SOURCES))
def test_s_read(benchmark, ratios, spark, broker, filled, who, query) -> None:
    df = SOURCES[who](spark, broker, filled)
    total = sum(filled.values())
    out = benchmark.pedantic(QUERIES[query], args=(df,), rounds=3, iterations=1,
                             warmup_rounds=1)
    if query == "count":
        assert out == total
    else:
        assert sum(r["count"] for r in out) == total
    ratios.add(f"S-read {query} ({total} records, lz4, local[2])", who, benchmark,
               amount=total, unit="rec")


def _kcodec_sink(df, bootstrap: str, topic: str) -> None:
    (df.write.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("kafka.compression.type", "lz4").mode("append").save())


def _confluent_sink(df, bootstrap: str, topic: str) -> None:
    def part(rows):
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                      "compression.type": "lz4", "acks": "all",
                                      "enable.idempotence": True})
        for r in rows:
            while True:
                try:
                    p.produce(topic, value=r["value"], key=r["key"])
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(120) == 0

    df.foreachPartition(part)


SINKS = {"kcodec cython": _kcodec_sink, "confluent-kafka per-row sink": _confluent_sink}


@pytest.mark.parametrize("who", list(SINKS))
def test_s_sink(benchmark, ratios, spark, broker, who) -> None:
    import pyspark.sql.functions as F

    df = spark.range(N, numPartitions=4).select(
        F.format_string("%016d", "id").cast("binary").alias("key"),
        F.format_string("%0100d", "id").cast("binary").alias("value")).cache()
    df.count()
    n = [0]

    def run() -> None:
        n[0] += 1
        SINKS[who](df, broker.bootstrap, f"bench-sink-{who[:6]}-{n[0]}".replace(" ", "-"))

    benchmark.pedantic(run, rounds=2, iterations=1)
    df.unpersist()
    ratios.add(f"S-sink ({N} rows, lz4, acks=all)", who, benchmark, amount=N, unit="rec")


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    """About LOG_MB MB of lz4 segments (4 partitions, 128 MiB segments)."""
    from kcodec.records import RecordBatchBuilder

    root = tmp_path_factory.mktemp("kafka-logs")
    target = LOG_MB << 20
    seg_max = 128 << 20
    written = 0
    import random

    rnd = random.Random(20240601)
    pool = [rnd.randbytes(100) for _ in range(1024)]   # 100 KiB: lz4 finds little to share
    for p in range(PARTITIONS):
        d = root / f"bench-log-{p}"
        d.mkdir()
        off = 0
        while written < target * (p + 1) // PARTITIONS:
            f = open(d / f"{off:020d}.log", "wb")
            size = 0
            with f:
                while size < seg_max and written < target * (p + 1) // PARTITIONS:
                    b = RecordBatchBuilder(compression=3, base_offset=off,
                                           max_size=256 * 1024)
                    ts = 1_700_000_000_000 + off
                    i = 0
                    while b.append(b"%016d" % (off + i), pool[(off + i) & 1023], [],
                                   timestamp=ts) is not None:
                        i += 1
                        if i >= 2000:
                            break
                    data = b.build()
                    f.write(data)
                    size += len(data)
                    written += len(data)
                    off += i
    return root, written


def test_s_log(benchmark, ratios, spark, log_dir) -> None:
    root, size = log_dir
    df = spark.read.format("kcodec-log").option("validateCrc", "true").load(str(root))
    t0 = time.perf_counter()
    total = df.count()
    first = time.perf_counter() - t0
    benchmark.pedantic(lambda: df.count(), rounds=2, iterations=1)
    med = benchmark.stats.stats.median
    print(f"\nS-log: {size / 1e6:.0f} MB of lz4 segments, {total} records: "
          f"{total / med / 1e6:.2f} M rows/s, {size / med / 1e6:.0f} MB/s "
          f"(first run {first:.1f} s)")
    ratios.add(f"S-log count ({size >> 20} MiB of segments, {total} records)",
               "kcodec cython", benchmark, amount=total, unit="rec")
