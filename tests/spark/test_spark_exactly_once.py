"""The exactly-once sink (``kcodec.deliveryGuarantee=exactly_once``) in the run's local Spark
session on kcodec's broker with two-phase commit: a streaming copy seen once by
read_committed readers; a micro-batch replayed after its transactions were committed (the
driver died before Spark's commit log) writes nothing again, where the at-least-once sink
writes it twice; a batch whose driver died between the tasks' prepare and its commit is
committed by the replay, not written again; a transaction a crashed task left open before
its batch marker is aborted by the replay and never seen; a batch ``df.write`` committed by the driver, and aborted when a task fails,
leaving nothing open."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

from kcodec.broker import Cluster  # noqa: E402
from kcodec.client import Admin, Producer  # noqa: E402
from tests.support.txn_util import FAST, confluent_read, kcodec_read  # noqa: E402

pytestmark = [pytest.mark.arrow]
N = 300


@pytest.fixture(scope="module")
def spark():
    from tests.support.spark_support import make_session

    return make_session()     # the run's shared session


@pytest.fixture(scope="module")
def cluster():
    with Cluster(transaction_two_phase_commit_enable=True) as c:
        yield c


def _topics(cluster, n_in: int = 2) -> tuple[str, str]:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=cluster.bootstrap, **FAST) as admin:
        admin.create_topics([a], num_partitions=n_in)
        admin.create_topics([b], num_partitions=2)
    return a, b


def _fill(bootstrap: str, topic: str, lo: int, hi: int, partitions: int = 2) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for i in range(lo, hi):
            p.send(topic, b"%06d" % i, key=b"k%d" % (i % partitions), partition=i % partitions)
        p.flush(30)


def _copy(spark, cluster, a: str, b: str, ck: Path, exactly_once: bool = True, **extra: str):
    w = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("subscribe", a).option("startingOffsets", "earliest").load()
         .selectExpr("key", "value", "partition")
         .writeStream.format("kcodec").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("topic", b).option("checkpointLocation", str(ck)))
    if exactly_once:
        w = w.option("kcodec.deliveryGuarantee", "exactly_once")
    for k, v in extra.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start()
    q.awaitTermination(240)
    assert q.exception() is None, q.exception()
    return q


def _values(cluster, topic: str, n: int) -> list[bytes]:
    return kcodec_read(cluster.bootstrap, topic, "read_committed", n, partitions=2, timeout=20)


def _open(cluster, pattern: str) -> list[str]:
    with Admin(bootstrap_servers=cluster.bootstrap, **FAST) as admin:
        return [t.transactional_id for t in admin.list_transactions(
            states=["Ongoing"], pattern=pattern)]


def _forget_last_commit(ck: Path) -> None:
    """What a driver killed after the sink's commit and before Spark's commit log leaves:
    the last batch in the offset log but not in the commit log."""
    last = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    (ck / "commits" / str(last)).unlink()
    (ck / "commits" / f".{last}.crc").unlink(missing_ok=True)


def test_stream_copy_exactly_once_and_a_replayed_batch(spark, cluster, tmp_path) -> None:
    a, b = _topics(cluster)
    _fill(cluster.bootstrap, a, 0, N)
    ck = tmp_path / "ck"
    q = _copy(spark, cluster, a, b, ck)
    want = sorted(b"%06d" % i for i in range(N))
    assert sorted(_values(cluster, b, N)) == want
    assert _open(cluster, f"kcodec-spark-{q.id}-.*") == []
    # the driver died after committing the transactions, before Spark's commit log: the
    # batch is replayed from the checkpoint and its tasks find it committed
    _forget_last_commit(ck)
    _copy(spark, cluster, a, b, ck)
    got = _values(cluster, b, N)
    assert sorted(got) == want
    # per-partition order of A: a key's records in the order they were written
    for part in (0, 1):
        mine = [v for v in got if int(v) % 2 == part]
        assert mine == sorted(mine)
    assert sorted(confluent_read(cluster.bootstrap, b, N, partitions=2)) == want


def test_stream_into_a_topic_the_sink_creates(spark, cluster, tmp_path) -> None:
    """The first micro-batch's marker look-up meets a topic that does not exist yet (the
    broker creates it on the first write): no marker there, the batch is written."""
    a, _ = _topics(cluster)
    b = f"new-{uuid.uuid4().hex[:8]}"
    _fill(cluster.bootstrap, a, 0, N)
    q = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("subscribe", a).option("startingOffsets", "earliest").load()
         .selectExpr("key", "value")
         .writeStream.format("kcodec").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("topic", b).option("checkpointLocation", str(tmp_path / "ck"))
         .option("kcodec.deliveryGuarantee", "exactly_once")
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert q.exception() is None, q.exception()
    with Admin(bootstrap_servers=cluster.bootstrap, **FAST) as admin:
        parts = len(admin.describe_cluster([b]).topics[0].partitions)
    got = kcodec_read(cluster.bootstrap, b, "read_committed", N, partitions=parts, timeout=20)
    assert sorted(got) == sorted(b"%06d" % i for i in range(N))


def test_at_least_once_writes_the_replayed_batch_twice(spark, cluster, tmp_path) -> None:
    """The contrast: the same replay with the default sink duplicates the batch."""
    a, b = _topics(cluster)
    _fill(cluster.bootstrap, a, 0, N)
    ck = tmp_path / "ck"
    _copy(spark, cluster, a, b, ck, exactly_once=False)
    _forget_last_commit(ck)
    _copy(spark, cluster, a, b, ck, exactly_once=False)
    got = _values(cluster, b, 2 * N)
    assert len(got) == 2 * N and len(set(got)) == N


def test_a_prepared_transaction_left_by_a_crash_is_never_seen(spark, cluster, tmp_path) -> None:
    """A task prepared its transaction and the driver died before committing it: the
    replayed task's new epoch aborts it and writes the rows once."""
    a, b = _topics(cluster)
    _fill(cluster.bootstrap, a, 0, N)
    ck = tmp_path / "ck"
    prefix = f"eos-{uuid.uuid4().hex[:6]}"
    _copy(spark, cluster, a, b, ck, **{"kcodec.transactionalIdPrefix": prefix})
    _forget_last_commit(ck)
    for part in (0, 1):     # what the crashed attempt left: prepared, never committed
        p = Producer(bootstrap_servers=cluster.bootstrap, transactional_id=f"{prefix}-{part}",
                     transaction_two_phase_commit_enable=True, **FAST)
        p.init_transactions()
        p.begin_transaction()
        p.send(b, b"zombie", partition=part)
        p.prepare_transaction()
        p.close(0)
    assert len(_open(cluster, f"{prefix}-.*")) == 2
    _copy(spark, cluster, a, b, ck, **{"kcodec.transactionalIdPrefix": prefix})
    got = _values(cluster, b, N)
    assert b"zombie" not in got and sorted(got) == sorted(b"%06d" % i for i in range(N))
    assert _open(cluster, f"{prefix}-.*") == []


def test_a_batch_prepared_when_the_driver_died_is_committed_by_the_replay(spark, cluster,
                                                                          tmp_path) -> None:
    """Every task prepared its transaction and the driver died before committing them (its
    commit and abort never reach the coordinator): the replayed batch's tasks find them
    prepared, with the batch's marker, and write nothing; the replay's driver commit commits
    them. The log of B then holds each record once (read_uncommitted too: nothing was
    aborted and written again)."""
    from kcodec.broker.hooks import DROP
    from kcodec.protocol import ApiKey

    a, b = _topics(cluster)
    _fill(cluster.bootstrap, a, 0, N)
    ck = tmp_path / "ck"
    prefix = f"kept-{uuid.uuid4().hex[:6]}"
    opts = {"kcodec.transactionalIdPrefix": prefix, "kafka.default.api.timeout.ms": "3000",
            "kafka.request.timeout.ms": "1000"}
    dead = {"on": True, "refused": 0}

    def driver_gone(req):     # the driver's commit and abort: InitProducerId keepPreparedTxn
        if dead["on"] and getattr(req.body, "keep_prepared_txn", False) and \
                req.header.client_id != "kcodec-spark-sink":
            dead["refused"] += 1
            return DROP
        return None
    remove = cluster.hook(ApiKey.INIT_PRODUCER_ID, driver_gone)
    try:
        with pytest.raises(Exception) as failed:      # the query stops on it
            _copy(spark, cluster, a, b, ck, **opts)
        assert "closed the connection" in str(failed.value), failed.value
    finally:
        dead["on"] = False
        remove()
    assert dead["refused"], "the driver's commit never came"
    assert len(_open(cluster, f"{prefix}-.*")) == 2        # prepared, not committed
    assert kcodec_read(cluster.bootstrap, b, "read_committed", 0, partitions=2, timeout=1) == []
    _copy(spark, cluster, a, b, ck, **opts)
    want = sorted(b"%06d" % i for i in range(N))
    assert sorted(_values(cluster, b, N)) == want
    assert sorted(kcodec_read(cluster.bootstrap, b, "read_uncommitted", N, partitions=2,
                              timeout=20)) == want
    assert _open(cluster, f"{prefix}-.*") == []


def test_batch_write_commits_in_the_driver_and_aborts_a_failed_write(spark, cluster,
                                                                    tmp_path) -> None:
    from pyspark.sql.functions import col, udf

    _, b = _topics(cluster)
    df = spark.range(0, N, 1, 3).selectExpr("CAST(id AS STRING) AS value")
    (df.write.format("kcodec").option("kafka.bootstrap.servers", cluster.bootstrap)
     .option("topic", b).option("kcodec.deliveryGuarantee", "exactly_once").mode("append").save())
    assert sorted(_values(cluster, b, N), key=int) == [b"%d" % i for i in range(N)]

    @udf("string")
    def fail_late(v: str) -> str:
        if v == str(N - 1):
            raise ValueError("a task fails after the others prepared")
        return v
    prefix = f"w-{uuid.uuid4().hex[:6]}"
    with pytest.raises(Exception, match="a task fails"):
        (df.select(fail_late(col("value")).alias("value")).write.format("kcodec")
         .option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", b)
         .option("kcodec.deliveryGuarantee", "exactly_once")
         .option("kcodec.transactionalIdPrefix", prefix).mode("append").save())
    assert _open(cluster, f"{prefix}-.*") == []
    assert len(_values(cluster, b, N)) == N          # nothing of the failed write


def test_options_are_checked() -> None:
    from kcodec.spark.options import parse_sink

    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t"}
    assert parse_sink({**base, "kcodec.deliveryGuarantee": "exactly-once"}).exactly_once
    assert not parse_sink(base).exactly_once
    for bad, msg in [({"kcodec.deliveryGuarantee": "twice"}, "at_least_once or exactly_once"),
                     ({"kcodec.deliveryGuarantee": "exactly_once", "kafka.acks": "1",
                       "kafka.enable.idempotence": "false"}, "kafka.acks=all"),
                     ({"kcodec.deliveryGuarantee": "exactly_once",
                       "kafka.enable.idempotence": "false"}, "idempotence=true"),
                     ({"kcodec.transactionalIdPrefix": "x"}, "is for"),
                     ({"kcodec.deliveryGuarantee": "exactly_once",
                       "kcodec.transactionalIdPrefix": "a b"}, "letters, digits")]:
        with pytest.raises(ValueError, match=msg):
            parse_sink({**base, **bad})



def test_the_drivers_abort_ends_a_task_that_wrote_on_after_it(cluster) -> None:
    """A task Spark cancelled when another failed can still be writing when the driver's
    abort runs, and open its transaction after the abort's first pass: the abort goes on
    terminating the write's open transactions for its sweep time, and the late task is
    fenced. (Seen under load: the failed-write test above found one task's transaction
    still open.)"""
    import threading
    import time

    from kcodec.client.errors import KcodecError
    from kcodec.spark.transactional import abort_all

    _, b = _topics(cluster)
    prefix = f"late-{uuid.uuid4().hex[:6]}"
    late: dict[str, object] = {}

    def task() -> None:
        time.sleep(0.7)                     # after the abort's first pass
        with Producer(bootstrap_servers=cluster.bootstrap, transactional_id=f"{prefix}-0",
                      **FAST) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send(b, b"late", partition=0).result(10)
            late["open"] = True
            time.sleep(2.0)                 # the sweep ends it meanwhile
            try:
                p.commit_transaction()
                late["committed"] = True
            except KcodecError as exc:
                late["fenced"] = type(exc).__name__

    t = threading.Thread(target=task)
    t.start()
    started = time.monotonic()
    abort_all({}, cluster.bootstrap, [], [f"{prefix}-0", f"{prefix}-1"], prefix, sweep_s=2.0)
    assert time.monotonic() - started >= 2.0
    t.join(30)
    assert late.get("open") and "committed" not in late, late
    assert _open(cluster, f"{prefix}-.*") == []
    assert kcodec_read(cluster.bootstrap, b, "read_committed", 0, partitions=2, timeout=1) == []
