"""``df.write.format("kcodec")`` and ``df.writeStream.format("kcodec")``: Spark's Kafka sink.

Columns, as Spark's sink reads them: ``value`` (required, string or binary), ``key``
(string or binary), ``headers`` (array<struct<key: string, value: binary>>), ``topic``
(string; the ``topic`` option overrides it), ``partition`` (int; null or absent: the
default partitioner). Other columns are ignored. Each task writes its Arrow batches with
kcodec's idempotent producer (acks=all unless ``kafka.acks`` says otherwise; compression
with ``kafka.compression.type``) through the columnar send path (whole columns encoded at
once, no per-row Python work), waits for every acknowledgement, and reports in its commit
message how many records it wrote and the last offset of each partition.

Delivery is at-least-once by default, as with Spark's sink: a task retried by Spark writes
its rows again. ``kcodec.deliveryGuarantee=exactly_once`` writes each task's rows in a
two-phase-commit transaction that the driver's commit ends (``kcodec.spark.transactional``):
read_committed readers see every row once, through task retries, executor and driver
crashes and broker restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from kcodec.spark.options import SinkOptions, parse_sink
from kcodec.spark.taskmetrics import TaskStats, report

__all__ = ["KafkaWriter", "KafkaCommitMessage", "make_stream_writer", "check_sink_schema",
           "write_batches"]

log = logging.getLogger(__name__)


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: record count and the last offset of each (topic, partition)."""

    records: int = 0
    last_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)   # TaskStats.as_dict of the task
    # exactly once: the task's prepared transaction, the topics it wrote, whether it found
    # its micro-batch committed already (a replay after a driver crash) and wrote nothing
    transactional_id: str | None = None
    prepared: str | None = None
    topics: list[str] = field(default_factory=list)
    skipped: bool = False
    kept: bool = False      # the prepared transaction is an earlier attempt's, kept, not rewritten


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's checks of the columns given to its Kafka sink."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise ValueError("Required attribute 'value' not found: the kcodec sink needs a "
                         "value column (string or binary)")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (StringType, BinaryType)):
            raise ValueError(f"{name} attribute type must be a string or binary, not "
                             f"{types[name].simpleString()}")
    if "topic" in types:
        if not isinstance(types["topic"], StringType):
            raise ValueError("topic attribute type must be a string, not "
                             f"{types['topic'].simpleString()}")
    elif opts.topic is None:
        raise ValueError("topic option required when no 'topic' attribute is present: "
                         "set .option('topic', NAME) or add a topic column")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise ValueError("partition attribute type must be an int, not "
                         f"{types['partition'].simpleString()}")
    if "headers" in types:
        t = types["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [(f.name, type(f.dataType)) for f in t.elementType.fields]
              == [("key", StringType), ("value", BinaryType)])
        if not ok:
            raise ValueError("headers attribute type must be array<struct<key: string, "
                             f"value: binary>>, not {t.simpleString()}")


def _column(rb: Any, name: str) -> Any:
    for i, n in enumerate(rb.schema.names):
        if n.lower() == name:
            return rb.column(i)
    return None


def _producer(make: Any, bootstrap: str, kw: dict[str, Any]) -> Any:
    """A started producer. A broker that cannot be reached (restarting) is tried again
    within ``kafka.default.api.timeout.ms``; then its error, naming the cause, fails the
    task."""
    import time

    from kcodec.client.errors import BrokerNotAvailableError, KafkaTimeoutError

    deadline = time.monotonic() + kw.get("api_timeout_ms", 60000) / 1000
    backoff = 0.1
    while True:
        try:
            return make(bootstrap_servers=bootstrap, **kw)
        except (BrokerNotAvailableError, KafkaTimeoutError):
            if time.monotonic() + backoff > deadline:
                raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)


def write_batches(opts: SinkOptions, batches: Iterator[Any], prefix: str | None = None,
                  streaming: bool = False) -> KafkaCommitMessage:
    """Produce every row of ``batches`` (pyarrow RecordBatches); wait for all acks. Exactly
    once: in the task's transaction (ids from ``prefix``), prepared, not committed."""
    from kcodec.spark import reach
    from kcodec.spark.security import materialize
    from kcodec.spark.workers import warn_if_pure

    warn_if_pure()
    kw = materialize(opts.client)
    with reach.named_cause(opts.bootstrap, kw, reach.EXECUTOR):
        if opts.exactly_once:
            return _write_txn(opts, kw, batches, prefix, streaming)
        return _write(opts, kw, batches)


def _topics(opts: SinkOptions, rb: Any) -> list[tuple[str, Any]]:
    """The topics of ``rb``'s rows, each with the mask of its rows (None: all of them)."""
    import pyarrow.compute as pc

    if opts.topic is not None:
        return [(opts.topic, None)]
    topic = _column(rb, "topic")
    if topic.null_count:
        raise ValueError("null topic present in the data: use the topic option to set a topic")
    names = pc.unique(topic).to_pylist()
    return [(t, None if len(names) == 1 else pc.equal(topic, t)) for t in names]


def _send(producer: Any, opts: SinkOptions, rb: Any, msg: KafkaCommitMessage,
          futures: list[tuple[str, Any]]) -> None:
    import pyarrow.compute as pc

    value, key = _column(rb, "value"), _column(rb, "key")
    headers, part = _column(rb, "headers"), _column(rb, "partition")
    for t, mask in _topics(opts, rb):
        cols = [value, key, headers, part]
        if mask is not None:
            cols = [None if c is None else pc.filter(c, mask) for c in cols]
        futures += [(t, f) for f in producer.send_columns(
            t, cols[0], key=cols[1], headers=cols[2], partition=cols[3])]
        if t not in msg.topics:
            msg.topics.append(t)
    msg.records += rb.num_rows


def _acknowledged(producer: Any, futures: list[tuple[str, Any]], msg: KafkaCommitMessage
                  ) -> None:
    # every batch acknowledged before the task reports success: a failed one raises
    # here (the task fails and Spark retries it), none is left unchecked
    producer.flush()
    for t, f in futures:
        r = f.result(0)
        tp = (t, r.partition)
        if r.offset > msg.last_offsets.get(tp, -1):
            msg.last_offsets[tp] = r.offset


def _write(opts: SinkOptions, kw: dict[str, Any], batches: Iterator[Any]) -> KafkaCommitMessage:
    from kcodec.client import Producer

    msg = KafkaCommitMessage()
    stats = TaskStats("write")
    futures: list[tuple[str, Any]] = []
    kw = dict(kw)
    kw.setdefault("client_id", "kcodec-spark-sink")
    with _producer(Producer, opts.bootstrap, kw) as producer:
        for rb in batches:
            if rb.num_rows:
                _send(producer, opts, rb, msg, futures)
        _acknowledged(producer, futures, msg)
        stats.records = msg.records
        _produce_stats(producer, stats)
    report(stats, opts.task_metrics, log)
    msg.stats = stats.as_dict()
    return msg


def _write_txn(opts: SinkOptions, kw: dict[str, Any], batches: Iterator[Any],
               prefix: str | None, streaming: bool) -> KafkaCommitMessage:
    """The exactly-once task (kcodec.spark.transactional): fence the earlier attempts, skip
    a micro-batch committed before, keep one an earlier attempt prepared, else write,
    commit the batch marker, prepare."""
    from kcodec.client import Admin, Producer
    from kcodec.spark import transactional as tx

    msg = KafkaCommitMessage()
    stats = TaskStats("write")
    it = iter(batches)
    first = next((rb for rb in it if rb.num_rows), None)
    if first is None:
        return msg                      # no rows: no transaction
    who = tx.task_txn(prefix or opts.txn_prefix, streaming)
    kw = dict(kw, transactional_id=who.transactional_id,
              transaction_two_phase_commit_enable=True)
    kw.setdefault("client_id", "kcodec-spark-sink")
    futures: list[tuple[str, Any]] = []
    producer = _producer(Producer, opts.bootstrap, kw)
    try:
        # a new epoch: an earlier attempt of this partition is fenced; what it left open is
        # aborted (a df.write) or kept (a micro-batch) to be looked at
        producer.init_transactions(keep_prepared_txn=who.batch is not None)
        if who.batch is not None:
            topics = [t for t, _ in _topics(opts, first)]
            with Admin(bootstrap_servers=opts.bootstrap, **tx.admin_config(opts.client)) as admin:
                found = tx.replayed(admin, who.transactional_id, topics, who.batch,
                                    producer.prepared_transaction_state)
            if found not in (tx.WRITE, tx.COMMITTED):   # prepared: the driver commits it
                for _ in it:
                    pass
                msg.kept = True
                msg.prepared = found
                msg.transactional_id = who.transactional_id
                msg.topics = topics
                return msg
            if producer.prepared_transaction_state is not None:
                # left open mid-write (no marker in it): aborted, the rows are written again
                producer.complete_transaction(tx.ABORT_STATE)
            if found == tx.COMMITTED:           # committed before the driver crashed
                for _ in it:
                    pass
                msg.skipped = True
                return msg
        producer.begin_transaction()
        _send(producer, opts, first, msg, futures)
        for rb in it:
            if rb.num_rows:
                _send(producer, opts, rb, msg, futures)
        _acknowledged(producer, futures, msg)
        if who.batch is not None:
            producer.send_offsets_to_transaction(tx.markers(msg.topics, who.batch),
                                                 who.transactional_id)
        msg.prepared = str(producer.prepare_transaction())
        msg.transactional_id = who.transactional_id
        stats.records = msg.records
        _produce_stats(producer, stats)
    finally:
        producer.close()     # a prepared transaction stays open for the driver's commit
    report(stats, opts.task_metrics, log)
    msg.stats = stats.as_dict()
    return msg


def _produce_stats(producer: Any, stats: TaskStats) -> None:
    """The task's Produce requests, their latency and the bytes sent, from the producer's
    own metrics (kcodec.client.metrics)."""
    from kcodec.client.metrics import registry_of
    from kcodec.observe.metrics import Counter, Histogram

    try:
        reg = registry_of(producer)
    except ValueError:      # metrics off: no numbers to give
        return
    for group, name, tags, m in reg.metrics():
        if group == "producer-node-metrics" and name == "request-latency" and \
                dict(tags).get("api") == "Produce" and isinstance(m, Histogram):
            stats.requests += m.count
            stats.latency_ms_sum += m.total
            stats.latency_ms_max = max(stats.latency_ms_max, m.max)
        elif group == "producer-topic-metrics" and name == "byte" and isinstance(m, Counter):
            stats.bytes += int(m.value)


def _summary(messages: list[Any], what: str) -> None:
    """The driver's side of a write: one INFO line for all its tasks."""
    if not log.isEnabledFor(logging.INFO):
        return
    tasks = [m.stats for m in messages if isinstance(m, KafkaCommitMessage) and m.stats]
    reqs = sum(t["requests"] for t in tasks)
    avg = sum(t["latency_ms_sum"] for t in tasks) / reqs if reqs else 0.0
    log.info("%s: %d tasks wrote %d records, %d bytes in %d produce requests (latency avg "
             "%.1f ms, max %.1f ms)", what, len(tasks), sum(t["records"] for t in tasks),
             sum(t["bytes"] for t in tasks), reqs, avg,
             max((t["latency_ms_max"] for t in tasks), default=0.0))


def _commit_txns(opts: SinkOptions, messages: list[KafkaCommitMessage], batch: int | None
                 ) -> None:
    from kcodec.spark.transactional import commit_all

    commit_all(opts.client, opts.bootstrap,
               [(m.transactional_id, m.prepared, m.topics) for m in messages
                if m.transactional_id is not None and m.prepared is not None], batch)


def _abort_txns(opts: SinkOptions, messages: list[Any], prefix: str | None) -> None:
    """Abort what the tasks prepared; terminate the ids of the tasks that failed (their
    entry is None), where the prefix is known (from the driver or another task)."""
    from kcodec.spark.transactional import abort_all

    done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    prepared = [(m.transactional_id, m.prepared) for m in done
                if m.transactional_id is not None and m.prepared is not None]
    if prefix is None:
        prefix = next((m.transactional_id.rpartition("-")[0] for m in done
                       if m.transactional_id is not None), None)
    failed = [f"{prefix}-{i}" for i, m in enumerate(messages)
              if prefix is not None and not isinstance(m, KafkaCommitMessage)]
    abort_all(opts.client, opts.bootstrap, prepared, failed, prefix)


class KafkaWriter(DataSourceArrowWriter):
    """The batch sink: each task produces its partition of the DataFrame."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.opts = parse_sink(options)
        check_sink_schema(schema, self.opts)
        self.messages: list[KafkaCommitMessage] = []
        self.prefix: str | None = None
        if self.opts.exactly_once:     # one prefix for the tasks of this write
            from kcodec.spark.transactional import batch_prefix

            self.prefix = self.opts.txn_prefix or batch_prefix()

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return write_batches(self.opts, iterator, self.prefix)

    def commit(self, messages: list[Any]) -> None:
        self.messages = [m for m in messages if isinstance(m, KafkaCommitMessage)]
        if self.opts.exactly_once:
            _commit_txns(self.opts, self.messages, None)
        _summary(self.messages, "write")

    def abort(self, messages: list[Any]) -> None:
        # At least once: records already acknowledged stay in Kafka, as with Spark's sink.
        # Exactly once: the tasks' transactions are aborted.
        self.messages = [m for m in messages if isinstance(m, KafkaCommitMessage)]
        if self.opts.exactly_once:
            _abort_txns(self.opts, messages, self.prefix)


try:   # pyspark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamBase
    _ARROW_STREAM = True
except ImportError:   # pragma: no cover - pyspark 4.0
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceStreamWriter as _StreamBase,
    )
    _ARROW_STREAM = False


class KafkaStreamWriter(_StreamBase):  # type: ignore[misc, valid-type]
    """The streaming sink: every micro-batch's rows, at-least-once."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.opts = parse_sink(options)
        check_sink_schema(schema, self.opts)
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        if not _ARROW_STREAM:   # pragma: no cover - pyspark 4.0 hands Rows
            import pyarrow as pa
            from pyspark.sql.pandas.types import to_arrow_schema

            schema = to_arrow_schema(self.schema)
            rows = [r.asDict(recursive=True) for r in iterator]
            iterator = iter([pa.RecordBatch.from_pylist(rows, schema=schema)])
        return write_batches(self.opts, iterator, streaming=True)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        if self.opts.exactly_once:
            _commit_txns(self.opts, [m for m in messages if isinstance(m, KafkaCommitMessage)],
                         batchId)
        _summary(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        if self.opts.exactly_once:
            _abort_txns(self.opts, messages, self.opts.txn_prefix)


def make_stream_writer(options: Any, schema: StructType) -> KafkaStreamWriter:
    return KafkaStreamWriter(options, schema)
