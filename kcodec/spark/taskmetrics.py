"""What each Spark task of the kcodec source and sink did: records, bytes, requests and their
latency, seconds.

pyspark's Python data source API (checked up to 4.3) has no custom metric hook: Spark asks a
Python scan for its own Python-worker metrics only (``PythonCustomMetric``), and the Python
stream reader and writer report no source or sink metrics into the query progress
(``ReportsSourceMetrics`` / ``ReportsSinkMetrics`` are not implemented for them). So:

* every read and write task logs one INFO line on ``kcodec.spark.source`` /
  ``kcodec.spark.sink`` in its Python worker (the executor's log, once logging is
  configured there), and a write's commit logs its totals on ``kcodec.spark.sink``;
* given the option ``kcodec.taskMetrics`` (source and sink, batch and streaming), a task
  also reports into a Spark accumulator that the driver reads (classic Spark; Spark Connect
  has no accumulators)::

      m = TaskMetrics(spark)
      df = spark.read.format("kcodec").option("kcodec.taskMetrics", m.id)...load()
      df.count()
      m.tasks       # one dict per task, as TaskStats.as_dict
      m.summary()   # {"read": {"tasks", "records", "bytes", "requests",
                    #           "request-latency-avg", "request-latency-max"}, "write": ...}

A read task's requests are its Fetch requests and ``bytes`` the record batches it fetched;
a write task's requests are its producer's Produce requests and ``bytes`` what the producer
sent of its records (Java's ``byte-total``). Latencies are in milliseconds. A task that fails
reports nothing through the accumulator (Spark keeps no accumulator update of a failed task).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["TaskMetrics", "TaskStats", "report"]

@dataclass
class TaskStats:
    """One task's work. ``kind`` is ``read`` or ``write``."""

    kind: str
    topic: str = ""
    partition: int = -1
    start: int = -1                  # a read task's offset range [start, end)
    end: int = -1
    records: int = 0
    bytes: int = 0
    requests: int = 0
    latency_ms_sum: float = 0.0
    latency_ms_max: float = 0.0
    seconds: float = 0.0
    began: float = field(default_factory=time.monotonic, repr=False)

    def request(self, ms: float) -> None:
        self.requests += 1
        self.latency_ms_sum += ms
        if ms > self.latency_ms_max:
            self.latency_ms_max = ms

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["began"]
        return d

    def line(self) -> str:
        what = (f"read {self.topic}[{self.partition}] offsets {self.start}..{self.end - 1}"
                if self.kind == "read" else "write")
        req = "fetches" if self.kind == "read" else "produce requests"
        avg = self.latency_ms_sum / self.requests if self.requests else 0.0
        return (f"task {what}: {self.records} records, {self.bytes} bytes, {self.requests} "
                f"{req} (latency avg {avg:.1f} ms, max {self.latency_ms_max:.1f} ms) in "
                f"{self.seconds:.3f} s")


class _Tasks:
    """An accumulator of lists of task dicts (concatenated): pyspark's AccumulatorParam
    protocol, without importing pyspark here (the driver-side planning runs without it)."""

    def zero(self, value: Any) -> list:
        return []

    def addInPlace(self, a: list, b: list) -> list:  # noqa: N802 - pyspark's name
        a.extend(b)
        return a


class TaskMetrics:
    """The driver's side: an accumulator the kcodec tasks of this session report into."""

    def __init__(self, spark: Any) -> None:
        try:
            sc = spark.sparkContext
        except Exception as exc:     # Spark Connect: no SparkContext, no accumulators
            raise ValueError("kcodec.spark.TaskMetrics needs a classic Spark session (Spark "
                             "Connect has no accumulators); read the tasks' INFO lines on "
                             "kcodec.spark.source / kcodec.spark.sink instead") from exc
        self._acc = sc.accumulator([], _Tasks())
        # Spark returns a Python task's accumulator updates to the accumulator of the data
        # source's registration: one found by Spark's own lookup (pyspark_kcodec) has none
        # that leads to this driver, one registered from this session has
        from kcodec.spark.source import KafkaSource

        spark.dataSource.register(KafkaSource)

    @property
    def id(self) -> str:
        """The value of the ``kcodec.taskMetrics`` option."""
        return str(self._acc.aid)

    @property
    def tasks(self) -> list[dict[str, Any]]:
        """One dict per finished kcodec task of this session: ``kind`` (read or write),
        topic, partition, offsets, records, bytes, requests and their latency."""
        return list(self._acc.value)

    def summary(self) -> dict[str, dict[str, float]]:
        """The tasks' totals per kind: ``{"read": {"tasks", "records", "bytes",
        "requests", "request-latency-avg", "request-latency-max"}, "write": ...}``."""
        out: dict[str, dict[str, float]] = {}
        for t in self._acc.value:
            s = out.setdefault(t["kind"], {"tasks": 0, "records": 0, "bytes": 0, "requests": 0,
                                           "request-latency-avg": 0.0,
                                           "request-latency-max": 0.0, "_sum": 0.0})
            s["tasks"] += 1
            for k in ("records", "bytes", "requests"):
                s[k] += t[k]
            s["_sum"] += t["latency_ms_sum"]
            s["request-latency-max"] = max(s["request-latency-max"], t["latency_ms_max"])
        for s in out.values():
            total = s.pop("_sum")
            s["request-latency-avg"] = total / s["requests"] if s["requests"] else 0.0
        return out


def report(stats: TaskStats, acc_id: int | None, log: logging.Logger) -> None:
    """End of a task: the INFO line, and the stats into the driver's accumulator."""
    stats.seconds = time.monotonic() - stats.began
    if log.isEnabledFor(logging.INFO):
        log.info("%s", stats.line())
    if acc_id is None:
        return
    from pyspark.accumulators import _accumulatorRegistry, _deserialize_accumulator

    acc = _accumulatorRegistry.get(acc_id)
    if acc is None:   # as Spark unpickles an accumulator a task uses: sent back at its end
        acc = _deserialize_accumulator(acc_id, [], _Tasks())  # type: ignore[arg-type]
    acc.add([stats.as_dict()])
