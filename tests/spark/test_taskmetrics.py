"""The Spark source's and sink's per-task metrics (kcodec.spark.taskmetrics): counts exact
against what the test wrote, in a real local session against a real broker; the parts
that need no session (options, the INFO lines, the accumulator protocol) alone."""

from __future__ import annotations

import logging
import uuid

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

from kcodec.spark.options import parse_sink, parse_source  # noqa: E402
from kcodec.spark.taskmetrics import TaskMetrics, TaskStats, report  # noqa: E402

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


def test_the_option_takes_an_accumulator_id_only() -> None:
    assert parse_source(BASE).task_metrics is None
    assert parse_source({**BASE, "kcodec.taskmetrics": "7"}).task_metrics == 7
    assert parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t",
                       "kcodec.taskmetrics": "3"}).task_metrics == 3
    with pytest.raises(ValueError, match="kcodec.taskMetrics must be an integer"):
        parse_source({**BASE, "kcodec.taskmetrics": "m.id"})


def test_no_spark_context_is_a_clear_error() -> None:
    class Connect:        # a Spark Connect session has no sparkContext
        @property
        def sparkContext(self):  # noqa: N802
            raise RuntimeError("not in Spark Connect")

    with pytest.raises(ValueError, match="Spark Connect has no accumulators"):
        TaskMetrics(Connect())


def test_a_task_reports_its_line_and_into_the_accumulator(caplog) -> None:
    from pyspark.accumulators import _accumulatorRegistry

    s = TaskStats("read", "orders", 3, 100, 200, records=100, bytes=5000)
    s.request(2.0)
    s.request(6.0)
    log = logging.getLogger("kcodec.spark.source")
    with caplog.at_level(logging.INFO, "kcodec.spark.source"):
        report(s, None, log)
    assert caplog.messages == [
        f"task read orders[3] offsets 100..199: 100 records, 5000 bytes, 2 fetches (latency "
        f"avg 4.0 ms, max 6.0 ms) in {s.seconds:.3f} s"]
    aid = 987654                    # as in a Python worker: the task makes the accumulator
    try:
        report(s, aid, log)
        report(TaskStats("read", "orders", 4, 0, 1, records=1), aid, log)
        got = _accumulatorRegistry[aid]._value
    finally:
        _accumulatorRegistry.pop(aid, None)
    assert [(t["partition"], t["records"], t["requests"], t["latency_ms_max"]) for t in got] \
        == [(3, 100, 2, 6.0), (4, 1, 0, 0.0)]


def test_the_sinks_commit_logs_the_write(caplog) -> None:
    from kcodec.spark.sink import KafkaCommitMessage, _summary

    msgs = [KafkaCommitMessage(10, stats=TaskStats("write", records=10, bytes=700, requests=2,
                                                   latency_ms_sum=8.0,
                                                   latency_ms_max=5.0).as_dict()),
            KafkaCommitMessage(5, stats=TaskStats("write", records=5, bytes=300, requests=1,
                                                  latency_ms_sum=4.0,
                                                  latency_ms_max=4.0).as_dict())]
    with caplog.at_level(logging.INFO, "kcodec.spark.sink"):
        _summary(msgs, "micro-batch 4")
    assert caplog.messages == ["micro-batch 4: 2 tasks wrote 15 records, 1000 bytes in 3 produce "
                               "requests (latency avg 4.0 ms, max 5.0 ms)"]


# ---------------------------------------------------------------------------------------------
# in a real session


@pytest.fixture(scope="module")
def spark():
    from tests.support.spark_support import make_session

    s = make_session()
    yield s
    s.stop()


def _topic(broker, partitions: int) -> str:
    from kcodec.client import Admin

    name = f"tm-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        assert a.create_topics([name], num_partitions=partitions)[name] is None
    return name


@pytest.mark.arrow
def test_a_sink_task_counts_what_it_wrote(broker, caplog) -> None:
    """write_batches is a sink task's whole work (the Python worker calls it): its stats, in
    its commit message and its INFO line, against the records given and the broker's
    acknowledgements."""
    import pyarrow as pa

    from kcodec.spark.sink import write_batches

    topic = _topic(broker, 2)
    opts = parse_sink({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    batches = [pa.record_batch({"value": [b"value-%04d" % i for i in range(j, j + 50)],
                                "partition": pa.array([i % 2 for i in range(j, j + 50)],
                                                      pa.int32())})
               for j in (0, 50, 100)]
    with caplog.at_level(logging.INFO, "kcodec.spark.sink"):
        msg = write_batches(opts, iter(batches))
    st = msg.stats
    assert msg.records == st["records"] == 150
    assert msg.last_offsets == {(topic, 0): 74, (topic, 1): 74}
    assert st["requests"] >= 1 and st["bytes"] >= 150 * 10      # the values at least
    assert 0 < st["latency_ms_max"] and st["latency_ms_sum"] >= st["latency_ms_max"]
    (line,) = [r.getMessage() for r in caplog.records if r.name == "kcodec.spark.sink"]
    assert line.startswith(f"task write: 150 records, {st['bytes']} bytes, "
                           f"{st['requests']} produce requests (latency avg ")


@pytest.mark.arrow
def test_tasks_report_exact_counts_sink_source_and_stream(spark, broker, tmp_path) -> None:
    """TaskMetrics in a session where Spark's own lookup found the kcodec format (its
    registration's accumulator leads nowhere: TaskMetrics registers it again)."""
    import kcodec.spark
    from tests.support.spark_support import fence

    kcodec.spark.register(spark)
    src = _topic(broker, 3)
    w = kcodec.spark.TaskMetrics(spark)
    rows = [(b"k%d" % i, b"value-%04d" % i, i % 3) for i in range(300)]
    (spark.createDataFrame(rows, "key binary, value binary, partition int").repartition(2)
     .write.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", src).option("kcodec.taskMetrics", w.id).mode("append").save())
    wrote = w.summary()["write"]
    assert (wrote["tasks"], wrote["records"]) == (2, 300)
    assert sorted(t["records"] for t in w.tasks) == [150, 150]
    assert all(t["requests"] >= 1 and t["bytes"] >= t["records"] * 10 for t in w.tasks)
    assert 0 < wrote["request-latency-avg"] <= wrote["request-latency-max"]
    fence(broker.bootstrap, src, 3)    # one more record per partition (see spark_support)

    r = kcodec.spark.TaskMetrics(spark)
    df = (spark.read.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", src).option("kcodec.taskMetrics", r.id).load())
    assert df.count() == 303
    read = r.summary()["read"]
    assert (read["tasks"], read["records"]) == (3, 303)
    tasks = sorted(r.tasks, key=lambda t: t["partition"])
    assert [(t["topic"], t["partition"], t["start"], t["end"], t["records"]) for t in tasks] \
        == [(src, p, 0, 101, 101) for p in range(3)]
    assert all(t["requests"] >= 1 and t["bytes"] >= 100 * 10 for t in tasks)
    assert 0 < read["request-latency-avg"] <= read["request-latency-max"]
    assert "write" not in r.summary()

    s = kcodec.spark.TaskMetrics(spark)
    q = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", 150).option("kcodec.taskMetrics", s.id).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    assert sum(p["numInputRows"] for p in q.recentProgress) == 303
    got = s.summary()["read"]
    assert got["records"] == 303 and got["tasks"] >= 3
    covered = sorted((t["partition"], t["start"], t["end"]) for t in s.tasks)
    for p in range(3):                # the micro-batches' ranges tile each partition
        mine = [(a, b) for q_, a, b in covered if q_ == p]
        assert mine[0][0] == 0 and mine[-1][1] == 101
        assert all(x[1] == y[0] for x, y in zip(mine, mine[1:], strict=False))
