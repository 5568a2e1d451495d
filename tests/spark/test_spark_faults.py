"""A broker stopped while Spark tasks read and write through kcodec.spark (kcodec's broker,
``Cluster.stop_node`` / ``restart_node``): a batch read and a streaming query retry to
exactly the records there are, and the sink loses none; a broker that stays away fails
the query with an error naming the cause, never a partial result."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.slow, pytest.mark.arrow]

N = 4000           # per partition: with 2 KiB fetches a task needs a few hundred fetches


@pytest.fixture(scope="module")
def spark():
    from tests.support.spark_support import make_session

    return make_session()     # the run's shared session


@pytest.fixture()
def cluster():
    from kcodec.broker import Cluster

    with Cluster(1, num_partitions=2) as c:
        yield c


def _fill(bootstrap: str, topic: str, n: int = N, start: int = 0) -> None:
    from kcodec.client import Producer

    # small batches: a read takes many fetches, so the broker stops in the middle of it
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=1024) as p:
        for i in range(start, start + n):
            for part in (0, 1):
                p.send(topic, b"%06d-" % i + b"x" * 90, key=b"k%d" % part, partition=part)
        p.flush(60)


def _source(spark, bootstrap: str, topic: str, **extra: str):
    r = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("kafka.max.partition.fetch.bytes", "2048")
         .option("kafka.request.timeout.ms", "3000")
         .option("kafka.reconnect.backoff.max.ms", "200"))
    for k, v in extra.items():
        r = r.option(k, v)
    return r.load()


def _stop_during_fetches(cluster, down_s: float | None) -> threading.Thread:
    """Stop the node once the tasks' fetches have begun; start it again after ``down_s``
    seconds (None: leave it stopped)."""
    cluster.record()

    def run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(cluster.recorded("Fetch")) < 10:
            time.sleep(0.005)
        cluster.stop_node(0)
        if down_s is not None:
            time.sleep(down_s)
            cluster.restart_node(0)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_batch_read_fails_clearly_when_the_broker_stays_away(spark, cluster) -> None:
    topic = f"f-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2)
    _fill(cluster.bootstrap, topic, 1500)
    df = _source(spark, cluster.bootstrap, topic, **{"kafkaConsumer.pollTimeoutMs": "4000",
                                                      "kafka.default.api.timeout.ms": "4000"})
    _stop_during_fetches(cluster, None)
    with pytest.raises(Exception) as e:
        df.count()
    text = str(e.value)
    assert any(w in text for w in ("no broker reachable", "pollTimeoutMs", "timed out")), \
        text[-3000:]


def test_sink_and_batch_read_across_broker_restarts(spark, cluster) -> None:
    """The sink's producers retry through a restart (every row arrives; at least once);
    a batch read retries through another (every record of the log read, once)."""
    import pyspark.sql.functions as F

    topic = f"f-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2)
    n = 12000
    df = spark.range(n, numPartitions=2).select(
        F.format_string("%06d", "id").alias("value"), (F.col("id") % 2).cast("int")
        .alias("partition"))
    cluster.record()

    def bounce() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(cluster.recorded("Produce")) < 3:
            time.sleep(0.005)
        cluster.stop_node(0)
        time.sleep(1.0)
        cluster.restart_node(0)

    t = threading.Thread(target=bounce, daemon=True)
    t.start()
    (df.write.format("kcodec").option("kafka.bootstrap.servers", cluster.bootstrap)
     .option("topic", topic).option("kafka.linger.ms", "20")
     .option("kafka.batch.size", "1024").mode("append").save())
    t.join(10)
    assert len(cluster.recorded("Produce")) > 3
    read = _source(spark, cluster.bootstrap, topic, **{"kafkaConsumer.pollTimeoutMs": "60000"})
    t = _stop_during_fetches(cluster, 1.0)
    got = read.selectExpr("partition", "offset", "CAST(value AS STRING) v").collect()
    t.join(10)
    assert len(cluster.recorded("Fetch")) > 40
    # the read: every offset of the log once
    ends = {p: max(r.offset for r in got if r.partition == p) + 1 for p in (0, 1)}
    assert sorted((r.partition, r.offset) for r in got) == [
        (p, o) for p in (0, 1) for o in range(ends[p])]
    # the sink: every row arrived. At least once, as Spark's sink: a batch whose
    # acknowledgement the restart lost may be stored twice
    values = [r.v for r in got]
    assert set(values) == {f"{i:06d}" for i in range(n)}
    assert len(values) - n < n // 10


def test_stream_across_a_broker_restart_exactly_once(spark, cluster, tmp_path) -> None:
    """A micro-batch query reading while the broker restarts: it retries, or fails with a
    clear error and is restarted from its checkpoint; the Parquet output holds every
    record exactly once."""
    topic = f"f-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2)
    _fill(cluster.bootstrap, topic, 1500)
    ck, out = tmp_path / "ck", tmp_path / "out"

    def start():
        r = (spark.readStream.format("kcodec")
             .option("kafka.bootstrap.servers", cluster.bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "600")
             .option("kafka.max.partition.fetch.bytes", "2048")
             .option("kafka.request.timeout.ms", "3000")
             .option("kafka.default.api.timeout.ms", "8000")
             .option("kafkaConsumer.pollTimeoutMs", "30000").load())
        return (r.selectExpr("partition", "offset", "CAST(value AS STRING) v")
                .writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(ck)).trigger(processingTime="100 milliseconds")
                .start())

    q = start()
    t = _stop_during_fetches(cluster, 1.0)
    extra = threading.Thread(target=_fill, args=(cluster.bootstrap, topic, 500, 1500))
    t.join(130)
    extra.start()   # more records while the query is (again) running
    extra.join(60)
    want = 2 * 2000
    failures = []
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        if not q.isActive:
            failures.append(str(q.exception()))
            q = start()            # from the checkpoint
        done = sum(p["numInputRows"] for p in q.recentProgress)
        if done and q.status["isDataAvailable"] is False:
            try:
                n = spark.read.parquet(str(out)).count()
            except Exception:    # noqa: BLE001 - no file yet
                n = 0
            if n >= want:
                break
        time.sleep(0.5)
    q.stop()
    for f in failures:   # a failure must say why
        assert any(w in f for w in ("no broker reachable", "pollTimeoutMs", "timed out",
                                    "closed", "refused")), f[-3000:]
    got = spark.read.parquet(str(out)).collect()
    keys = sorted((r.partition, r.offset) for r in got)
    assert keys == [(p, o) for p in (0, 1) for o in range(2000)]     # exactly once
    assert all(r.v.startswith(f"{r.offset:06d}-") for r in got)
