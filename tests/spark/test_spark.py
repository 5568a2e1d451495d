"""kcodec.spark in a real local Spark session (one for the whole run) against the real
broker: the batch source compared with confluent-kafka, its options, pushdown, the sink,
streaming with a checkpoint restart, offsets committed to a group, and the log-segment
source on real Kafka segments."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("confluent_kafka")

from kcodec.client import Admin, Producer  # noqa: E402
from kcodec.spark.stream import NEW_API  # noqa: E402
from tests.support.segments import (  # noqa: E402
    META_LOG,
    TOPIC_LOG,
    reference,
    simple_batches,
    write_segment,
)
from tests.support.spark_support import (  # noqa: E402
    FENCE,
    confluent_produce,
    confluent_read,
    fence,
    make_session,
    spark_rows,
)

pytestmark = [pytest.mark.arrow, pytest.mark.peers]


@pytest.fixture(scope="session")
def spark():
    s = make_session()
    yield s
    s.stop()


def _topic(broker, partitions: int) -> str:
    name = f"sp-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        assert a.create_topics([name], num_partitions=partitions)[name] is None
    return name


def _records(n: int, partitions: int) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 9 == 0 else b"key-%d" % (i % 37)
        value = None if i % 13 == 5 else (b"value-%d-" % i) * (i % 5 + 1)
        headers = [] if i % 3 else [("h1", b"x%d" % i), ("h2", None)]
        out.append((key, value, headers, 1_700_000_000_000 + i * 7, i % partitions))
    return out


def _read(spark, broker, **options):
    r = spark.read.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


@pytest.fixture(scope="module")
def data(broker):
    """A 3-partition topic written by confluent-kafka, and what confluent-kafka reads back."""
    topic = _topic(broker, 3)
    confluent_produce(broker.bootstrap, topic, _records(600, 3), 3)
    return topic, confluent_read(broker.bootstrap, topic, 3)


# ---------------------------------------------------------------------------------------------
# batch source


def test_registered_automatically(spark, tmp_path) -> None:
    """pyspark_kcodec / pyspark_kcodec_log are found by Spark's lookup: no register()."""
    (tmp_path / "t-0").mkdir()
    write_segment(tmp_path / "t-0", 0, simple_batches())   # 3 batches of 2 records
    df = spark.read.format("kcodec-log").load(str(tmp_path / "t-0"))
    assert df.count() == 6


def test_register_keeps_what_spark_found_and_reads(spark, tmp_path) -> None:
    """register() in a session whose lookup ran in this Python: Spark found both formats
    (asked through the JVM's DataSourceManager, which must work on every supported
    pyspark, or register would replace them with a warning) and they still read."""
    import kcodec.spark

    assert kcodec.spark._found_by_spark(spark, "kcodec")
    assert kcodec.spark._found_by_spark(spark, "kcodec-log")
    assert not kcodec.spark._found_by_spark(spark, "no-such-format")
    kcodec.spark.register(spark)
    (tmp_path / "t-0").mkdir()
    write_segment(tmp_path / "t-0", 0, simple_batches(n_batches=2))
    assert spark.read.format("kcodec-log").load(str(tmp_path / "t-0")).count() == 4


def test_batch_equals_confluent(spark, broker, data) -> None:
    topic, want = data
    df = _read(spark, broker, subscribe=topic, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
        "headers"]
    assert spark_rows(df) == want
    assert {r.topic for r in df.select("topic").distinct().collect()} == {topic}
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {p: 201 for p in range(3)}      # 200 + the fence each


def test_schema_without_headers_and_fixed(spark, broker, data) -> None:
    topic, want = data
    df = _read(spark, broker, subscribe=topic)
    assert "headers" not in df.columns
    assert [r[:4] + r[5:] for r in spark_rows(df)] == [r[:4] + r[5:] for r in want]
    from pyspark.sql.types import StringType, StructField, StructType

    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("kcodec").schema(StructType([StructField("v", StringType())]))
         .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
         .load().collect())


def test_offsets_assign_and_pattern(spark, broker, data) -> None:
    topic, want = data
    df = _read(spark, broker, assign=f'{{"{topic}": [1]}}',
               startingOffsets=f'{{"{topic}": {{"1": 5}}}}',
               endingOffsets=f'{{"{topic}": {{"1": 25}}}}')
    assert spark_rows(df) == [r for r in want if r[0] == 1 and 5 <= r[1] < 25]
    df = _read(spark, broker, subscribePattern=topic[:6] + ".*",
               startingOffsets="earliest", endingOffsets="latest")
    assert {r.topic for r in df.select("topic").distinct().collect()} >= {topic}


@pytest.mark.slow
def test_min_partitions_and_max_records(spark, broker, data) -> None:
    topic, want = data
    df = _read(spark, broker, subscribe=topic, minPartitions="7")
    assert df.rdd.getNumPartitions() == 7
    assert [r[:4] for r in spark_rows(df)] == [r[:4] for r in want]
    df = _read(spark, broker, subscribe=topic, maxRecordsPerPartition="50")
    assert df.rdd.getNumPartitions() == 3 * 5      # 201 offsets each -> 5 ranges of <= 50
    assert df.count() == 603


def test_empty_results(spark, broker, data) -> None:
    topic, _ = data
    assert _read(spark, broker, subscribe="no-such-topic-" + uuid.uuid4().hex[:6]).count() == 0
    df = _read(spark, broker, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 3, '
               f'"1": 3, "2": 3}}}}', endingOffsets=f'{{"{topic}": {{"0": 3, "1": 3, "2": 3}}}}')
    assert df.count() == 0


def test_bad_options_fail_clearly(spark, broker, data) -> None:
    topic, _ = data
    with pytest.raises(Exception, match="startingOffsets"):
        _read(spark, broker, subscribe=topic, **{"kafka.auto.offset.reset": "earliest"}
              ).collect()
    with pytest.raises(Exception, match="exactly one of"):
        _read(spark, broker).collect()


def test_pushdown_narrows_ranges(spark, broker, data) -> None:
    """pyspark >= 4.1 with pushdown on: the ranges are narrowed. Before 4.1 (no
    pushFilters in the API) and with pushdown off: the same rows, Spark filtering them."""
    from pyspark.sql.datasource import DataSourceReader

    pushdown = hasattr(DataSourceReader, "pushFilters")
    topic, want = data
    df = _read(spark, broker, subscribe=topic)
    q = df.where("partition = 2 AND offset >= 10 AND offset < 20")
    # one range left after pushdown; else one task per partition
    assert q.rdd.getNumPartitions() == (1 if pushdown else 3)
    assert [r[:2] for r in spark_rows(q)] == [(2, o) for o in range(10, 20)]
    q = df.where("partition IN (0, 1) AND offset > 195")
    assert sorted((r[0], r[1]) for r in spark_rows(q)) == [
        (p, o) for p in (0, 1) for o in range(196, 200)]
    # with pushdown off the same query gives the same rows (Spark filters them)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        q = _read(spark, broker, subscribe=topic).where("partition = 2 AND offset < 5")
        assert q.rdd.getNumPartitions() == 3        # nothing narrowed, nothing refused
        assert [r[:2] for r in spark_rows(q)] == [(2, o) for o in range(5)]
        q = _read(spark, broker, subscribe=topic).where("partition IN (0, 1) AND offset > 195")
        assert sorted((r[0], r[1]) for r in spark_rows(q)) == [
            (p, o) for p in (0, 1) for o in range(196, 200)]
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


@pytest.mark.slow
def test_broker_gone_fails_the_query(spark) -> None:
    """A broker that is gone when the query runs fails it with the client's error, never an
    empty or partial result."""
    from kcodec.testing.tansu import Tansu

    with Tansu() as b:
        name = f"gone-{uuid.uuid4().hex[:6]}"
        with Admin(bootstrap_servers=b.bootstrap) as a:
            a.create_topics([name], num_partitions=2)
        fence(b.bootstrap, name, 2)
        df = (spark.read.format("kcodec").option("kafka.bootstrap.servers", b.bootstrap)
              .option("subscribe", name).option("kafka.default.api.timeout.ms", "3000")
              .option("kafka.request.timeout.ms", "2000")
              .option("kafkaConsumer.pollTimeoutMs", "3000").load())
        assert df.count() == 2
        b.stop()
        with pytest.raises(Exception, match="no broker reachable|within"):
            df.count()


# ---------------------------------------------------------------------------------------------
# sink


@pytest.mark.slow
def test_sink_round_trip(spark, broker) -> None:
    import pyspark.sql.functions as F

    topic = _topic(broker, 4)
    df = spark.range(3000).select(
        F.when(F.col("id") % 10 == 0, None).otherwise(F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("v-"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.when(F.col("id") % 2 == 0, F.array(F.struct(
            F.lit("n").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))))
        .alias("headers"))
    (df.write.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic).option("kafka.compression.type", "lz4").mode("append").save())
    fence(broker.bootstrap, topic, 4)
    got = confluent_read(broker.bootstrap, topic, 4)
    assert len(got) == 3000
    assert sorted(v for *_x, v, _h, _t, _tt in [(r[2], r[3], r[4], r[5], r[6]) for r in got]) \
        == sorted(b"v-%d" % i for i in range(3000))
    by_value = {r[3]: r for r in got}
    r7 = by_value[b"v-7"]
    assert r7[2] == b"7" and r7[4] == []
    r8 = by_value[b"v-8"]
    assert r8[4] == [("n", b"8")]
    assert by_value[b"v-10"][2] is None


@pytest.mark.slow
def test_sink_topic_and_partition_columns(spark, broker) -> None:
    a, b = _topic(broker, 2), _topic(broker, 2)
    rows = [(a if i % 2 else b, i % 2, f"v{i}") for i in range(40)]
    df = spark.createDataFrame(rows, "topic string, partition int, value string")
    df.write.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap) \
        .mode("append").save()
    for t in (a, b):
        fence(broker.bootstrap, t, 2)
    got_a = confluent_read(broker.bootstrap, a, 2)
    got_b = confluent_read(broker.bootstrap, b, 2)
    # on a failure, each record's (partition, offset, value) as read: offsets that repeat
    # or skip tell a broker's offset assignment from a batch the sink never delivered
    seen = {t: [(r[0], r[1], r[3]) for r in got] for t, got in ((a, got_a), (b, got_b))}
    assert {r[0] for r in got_a} == {1} and {r[0] for r in got_b} == {0}, seen
    assert sorted(r[3] for r in got_a + got_b) == \
        sorted(f"v{i}".encode() for i in range(40)), seen


def test_sink_rejects(spark, broker) -> None:
    bs = broker.bootstrap
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception, match="value attribute type must be a string or binary"):
        df.write.format("kcodec").option("kafka.bootstrap.servers", bs).option("topic", "x") \
            .mode("append").save()
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.write.format("kcodec").option("kafka.bootstrap.servers", bs).option("topic", "x") \
            .mode("append").save()
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("kcodec").option("kafka.bootstrap.servers", bs).mode("append").save()
    with pytest.raises(Exception, match="overwrite is not allowed"):
        df.write.format("kcodec").option("kafka.bootstrap.servers", bs).option("topic", "x") \
            .mode("overwrite").save()


# ---------------------------------------------------------------------------------------------
# streaming


def _stream(spark, broker, topic: str, ck: Path, out: Path, **options):
    r = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().where(f"value != X'{FENCE.hex()}'")
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
         .writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    return q


@pytest.mark.slow
def test_stream_restart_from_checkpoint(spark, broker, tmp_path) -> None:
    topic = _topic(broker, 2)
    ck, out = tmp_path / "ck", tmp_path / "out"
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        for i in range(500):
            p.send(topic, b"a%d" % i, partition=i % 2)
    fence(broker.bootstrap, topic, 2)
    q = _stream(spark, broker, topic, ck, out, maxOffsetsPerTrigger="150",
                commitOffsetsToGroup="true")
    rows = [p["numInputRows"] for p in q.recentProgress]
    assert sum(rows) == 502
    group = f"spark-kafka-source-{topic}"
    if NEW_API:
        assert max(rows) <= 150       # rate limited, fences included
        # every batch committed to the group, the last one too (Spark itself commits a
        # batch to its source only when the next one starts: it stopped at 225 of 251)
        with Admin(bootstrap_servers=broker.bootstrap) as a:
            committed = a.committed_offsets(group, [topic])
        assert {tp.partition: off for tp, off in committed.items()} == {0: 251, 1: 251}
    # (pyspark 4.0/4.1 have no AvailableNow for Python sources: Spark asks for the latest
    # offset once, before the initial one, and reads up to it in one micro-batch)
    # more data, then the same query again from its checkpoint
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        for i in range(500, 800):
            p.send(topic, b"a%d" % i, partition=i % 2)
    fence(broker.bootstrap, topic, 2)
    _stream(spark, broker, topic, ck, out, commitOffsetsToGroup="true")
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        committed = a.committed_offsets(group, [topic])
    want = {0: 402, 1: 402} if NEW_API else {0: 251, 1: 251}   # 4.0/4.1: see below
    assert {tp.partition: off for tp, off in committed.items()} == want
    got = spark.read.parquet(str(out)).collect()
    values = sorted(r.v for r in got)
    assert values == sorted(f"a{i}" for i in range(800))        # nothing lost, none twice
    assert len({(r.partition, r.offset) for r in got}) == 800


def _committed(broker, group: str, topic: str) -> dict[int, int]:
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        return {tp.partition: off for tp, off in a.committed_offsets(group, [topic]).items()}


@pytest.mark.skipif(not NEW_API, reason="pyspark 4.0/4.1 run Trigger.AvailableNow as one "
                    "batch read by Spark's fallback, which never asks the reader again")
def test_available_now_commits_its_last_batch(spark, broker, tmp_path) -> None:
    """A Trigger.AvailableNow run leaves every batch it read committed to the group, the
    last one included, so lag tools show the work as done."""
    topic = _topic(broker, 2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        for i in range(40):
            p.send(topic, b"a%d" % i, partition=i % 2)
    fence(broker.bootstrap, topic, 2)
    q = _stream(spark, broker, topic, tmp_path / "ck", tmp_path / "out",
                maxOffsetsPerTrigger="15", commitOffsetsToGroup="progress")
    assert sum(p["numInputRows"] for p in q.recentProgress) == 42
    assert _committed(broker, "progress", topic) == {0: 21, 1: 21}


def test_stopped_stream_has_committed_what_it_processed(spark, broker, tmp_path) -> None:
    """A query with the default trigger, stopped after it caught up: its last batch is
    committed (Spark calls commit only when a next batch starts, and none did)."""
    topic = _topic(broker, 2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        for i in range(20):
            p.send(topic, b"a%d" % i, partition=i % 2)
    fence(broker.bootstrap, topic, 2)
    q = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("commitOffsetsToGroup", "true").load()
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        q.processAllAvailable()
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
            for i in range(20, 30):
                p.send(topic, b"a%d" % i, partition=0)
        fence(broker.bootstrap, topic, 2)
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    assert _committed(broker, f"spark-kafka-source-{topic}", topic) == {0: 22, 1: 12}


@pytest.mark.slow
def test_stream_pattern_new_topic_and_stream_sink(spark, broker, tmp_path) -> None:
    """subscribePattern picks up a topic created after the query started; writeStream
    through the kcodec sink copies every record once per run."""
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    first, second, out = f"{prefix}-a", f"{prefix}-b", _topic(broker, 1)
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([first], num_partitions=2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        for i in range(100):
            p.send(first, b"a%d" % i, partition=i % 2)
    fence(broker.bootstrap, first, 2)

    def run() -> None:
        q = (spark.readStream.format("kcodec")
             .option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribePattern", prefix + "-.*").option("startingOffsets", "earliest")
             .load().where(f"value != X'{FENCE.hex()}'").select("key", "value")
             .writeStream.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", out).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()

    run()
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([second], num_partitions=3)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        for i in range(60):
            p.send(second, b"b%d" % i, partition=i % 3)
    fence(broker.bootstrap, second, 3)
    run()
    fence(broker.bootstrap, out, 1)
    got = sorted(r[3] for r in confluent_read(broker.bootstrap, out, 1))
    assert got == sorted([b"a%d" % i for i in range(100)] + [b"b%d" % i for i in range(60)])


# ---------------------------------------------------------------------------------------------
# log-segment source


@pytest.mark.slow
@pytest.mark.reference
def test_log_source_real_segments(spark) -> None:
    from kcodec.records.segment import LogSegment

    for log in (TOPIC_LOG, META_LOG):
        path = reference(log)
        want = []
        with LogSegment(path) as seg:
            for b in seg:
                if not b.is_control:
                    want += [(r.offset, r.key, r.value) for r in b]
        df = spark.read.format("kcodec-log").load(str(path.parent))
        got = sorted((r.offset, None if r.key is None else bytes(r.key),
                      None if r.value is None else bytes(r.value)) for r in df.collect())
        assert got == sorted(want)
        topic, part = path.parent.name.rsplit("-", 1)
        assert {(r.topic, r.partition) for r in df.select("topic", "partition").distinct()
                .collect()} == {(topic, int(part))}
    df = spark.read.format("kcodec-log").option("includeProducer", "true") \
        .load(str(reference(META_LOG)))
    assert {"producerId", "producerEpoch", "baseSequence"} <= set(df.columns)
    q = df.where("offset >= 4000 AND offset < 4010")
    assert sorted(r.offset for r in q.collect()) == list(range(4000, 4010))


def test_log_source_gaps_and_cut_tail(spark, tmp_path) -> None:
    """Transaction markers leave gaps (normal); a cut tail fails clearly unless asked."""
    from kcodec.records import RecordBatchBuilder

    d = tmp_path / "orders-3"
    d.mkdir()
    blob = b""
    b = RecordBatchBuilder(base_offset=0, producer_id=7, producer_epoch=0,
                           is_transactional=True)
    for i in range(5):
        b.append(b"k", b"v%d" % i, [], timestamp=1000 + i)
    blob += b.build()
    c = RecordBatchBuilder(base_offset=5, is_control=True, is_transactional=True,
                           producer_id=7, producer_epoch=0)
    c.append_control(1, coordinator_epoch=0, timestamp=2000)
    blob += c.build()
    b = RecordBatchBuilder(base_offset=6)
    for i in range(3):
        b.append(None, b"w%d" % i, [("h", None)], timestamp=3000 + i)
    last = b.build()
    (d / "00000000000000000000.log").write_bytes(blob + last)
    df = spark.read.format("kcodec-log").option("includeHeaders", "true") \
        .option("includeProducer", "true").load(str(d))
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == [0, 1, 2, 3, 4, 6, 7, 8]
    assert [r.producerId for r in rows] == [7] * 5 + [-1] * 3
    assert rows[5].headers[0].key == "h" and rows[0].headers is None
    (d / "00000000000000000000.log").write_bytes(blob + last[:-7])
    with pytest.raises(Exception, match="failOnCorruption=false"):
        spark.read.format("kcodec-log").load(str(d)).collect()
    got = spark.read.format("kcodec-log").option("failOnCorruption", "false").load(str(d))
    assert sorted(r.offset for r in got.collect()) == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_stream_min_offsets_per_trigger_and_max_trigger_delay(spark, broker) -> None:
    """Spark passes the source's read limit through: a micro-batch waits for
    minOffsetsPerTrigger new offsets or for maxTriggerDelay since the last one."""
    import datetime as dt
    import time

    topic = _topic(broker, 1)

    def produce(n: int, start: int) -> None:
        # one record per batch: Tansu's ListOffsets LATEST is right then
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            for i in range(start, start + n):
                p.send(topic, b"m%d" % i, partition=0).result(30)

    def batches() -> list[tuple[float, int]]:
        out = []
        for p in q.recentProgress:
            if p["numInputRows"]:
                ts = dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00"))
                out.append((ts.timestamp(), p["numInputRows"]))
        return out

    def wait_for(k: int, timeout: float = 60) -> list[tuple[float, int]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = batches()
            if len(got) >= k:
                return got
            time.sleep(0.1)
        raise AssertionError(f"{k} micro-batches expected, got {batches()}")

    produce(10, 0)
    name = f"minoff_{uuid.uuid4().hex[:6]}"
    q = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("minOffsetsPerTrigger", "50").option("maxTriggerDelay", "8s").load()
         .writeStream.format("memory").queryName(name)
         .trigger(processingTime="100 milliseconds").start())
    try:
        first = wait_for(1)
        assert first[0][1] == 10                  # the first trigger never waits
        produce(20, 10)                           # fewer than 50: wait for the delay
        second = wait_for(2)
        assert second[1][1] == 20
        assert second[1][0] - second[0][0] >= 8 * 0.95
        produce(60, 30)                           # 60 >= 50: at the next trigger
        third = wait_for(3)
        assert 50 <= third[2][1] <= 60            # as soon as 50 wait (sends take time)
        assert third[2][0] - third[1][0] < 8 * 0.95
    finally:
        q.stop()
    assert spark.table(name).count() == sum(n for _, n in batches())
