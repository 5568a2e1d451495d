"""``df.write.format("kcodec")`` and ``df.writeStream.format("kcodec")``: Spark's Kafka sink.

Columns, as Spark's sink reads them: ``value`` (required, string or binary), ``key``
(string or binary), ``headers`` (array<struct<key: string, value: binary>>), ``topic``
(string; the ``topic`` option overrides it), ``partition`` (int; null or absent: the
default partitioner). Other columns are ignored. Each task writes its Arrow batches with
kcodec's idempotent producer (acks=all unless ``kafka.acks`` says otherwise; compression
with ``kafka.compression.type``) through the columnar send path (whole columns encoded at
once, no per-row Python work), waits for every acknowledgement, and reports in its commit
message how many records it wrote and the last offset of each partition.

Delivery is at-least-once, as with Spark's sink: a task retried by Spark writes its rows
again.
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


def write_batches(opts: SinkOptions, batches: Iterator[Any]) -> KafkaCommitMessage:
    """Produce every row of ``batches`` (pyarrow RecordBatches); wait for all acks."""
    from kcodec.spark import reach
    from kcodec.spark.security import materialize
    from kcodec.spark.workers import warn_if_pure

    warn_if_pure()
    kw = materialize(opts.client)
    with reach.named_cause(opts.bootstrap, kw, reach.EXECUTOR):
        return _write(opts, kw, batches)


def _write(opts: SinkOptions, kw: dict[str, Any], batches: Iterator[Any]) -> KafkaCommitMessage:
    import pyarrow.compute as pc

    from kcodec.client import Producer

    msg = KafkaCommitMessage()
    stats = TaskStats("write")
    futures: list[tuple[str, Any]] = []
    kw = dict(kw)
    kw.setdefault("client_id", "kcodec-spark-sink")
    with _producer(Producer, opts.bootstrap, kw) as producer:
        for rb in batches:
            if not rb.num_rows:
                continue
            value, key = _column(rb, "value"), _column(rb, "key")
            headers, part = _column(rb, "headers"), _column(rb, "partition")
            if opts.topic is not None:
                groups = [(opts.topic, None)]
            else:
                topic = _column(rb, "topic")
                if topic.null_count:
                    raise ValueError("null topic present in the data: use the topic option "
                                     "to set a topic")
                names = pc.unique(topic).to_pylist()
                groups = [(t, None if len(names) == 1 else pc.equal(topic, t))
                          for t in names]
            for t, mask in groups:
                cols = [value, key, headers, part]
                if mask is not None:
                    cols = [None if c is None else pc.filter(c, mask) for c in cols]
                futures += [(t, f) for f in producer.send_columns(
                    t, cols[0], key=cols[1], headers=cols[2], partition=cols[3])]
            msg.records += rb.num_rows
        # every batch acknowledged before the task reports success: a failed one raises
        # here (the task fails and Spark retries it), none is left unchecked
        producer.flush()
        for t, f in futures:
            r = f.result(0)
            tp = (t, r.partition)
            if r.offset > msg.last_offsets.get(tp, -1):
                msg.last_offsets[tp] = r.offset
        stats.records = msg.records
        _produce_stats(producer, stats)
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


class KafkaWriter(DataSourceArrowWriter):
    """The batch sink: each task produces its partition of the DataFrame."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.opts = parse_sink(options)
        check_sink_schema(schema, self.opts)
        self.messages: list[KafkaCommitMessage] = []

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[Any]) -> None:
        self.messages = [m for m in messages if isinstance(m, KafkaCommitMessage)]
        _summary(self.messages, "write")

    def abort(self, messages: list[Any]) -> None:
        # Records already acknowledged stay in Kafka (at-least-once, like Spark's sink).
        self.messages = [m for m in messages if isinstance(m, KafkaCommitMessage)]


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
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        _summary(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        pass


def make_stream_writer(options: Any, schema: StructType) -> KafkaStreamWriter:
    return KafkaStreamWriter(options, schema)
