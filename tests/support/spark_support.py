"""Helpers of the Spark tests: the shared local SparkSession, producing with confluent-kafka,
and the fence that works around Tansu's ListOffsets LATEST defect.

Tansu answers ListOffsets LATEST with (base offset of the last batch + 1) when the last batch
holds several records (see the reference notes on the broker). The kcodec source asks
ListOffsets as a real broker expects, so the tests end every partition with one record in a
batch of its own (``fence``): LATEST is then right, and the fence records (value
``FENCE``) are left out of the comparisons.
"""

from __future__ import annotations

import os
import sys
from typing import Any

FENCE = b"__fence__"


def make_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]")
             .config("spark.driver.host", "127.0.0.1")    # loopback only
             .config("spark.driver.bindAddress", "127.0.0.1")
             .appName("kcodec-tests")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.sql.session.timeZone", "America/New_York")  # not UTC on purpose
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.python.worker.reuse", "true")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.streaming.pollingDelay", "50ms")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def fence(bootstrap: str, topic: str, partitions: int) -> None:
    """One single-record batch at the end of every partition (see the module docstring)."""
    from kcodec.client import Producer

    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for i in range(partitions):
            p.send(topic, FENCE, partition=i).result(30)


def confluent_produce(bootstrap: str, topic: str, records: list[tuple], partitions: int
                      ) -> None:
    """Produce (key, value, headers, timestamp, partition) with confluent-kafka."""
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "compression.type": "lz4"})
    for key, value, headers, ts, part in records:
        p.produce(topic, value=value, key=key, headers=headers or None, timestamp=ts,
                  partition=part)
    assert p.flush(30) == 0
    fence(bootstrap, topic, partitions)


def confluent_read(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    """Every record (fences left out): (partition, offset, key, value, headers, ts ms,
    timestamp type in Spark's numbering)."""
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"cf-{topic}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    c.assign([confluent_kafka.TopicPartition(topic, i, confluent_kafka.OFFSET_BEGINNING)
              for i in range(partitions)])
    out: list[tuple] = []
    fences = 0
    try:
        while fences < partitions:
            m = c.poll(5)
            assert m is not None, "confluent-kafka read nothing for 5 s"
            assert m.error() is None, m.error()
            if m.value() == FENCE:
                fences += 1
                continue
            tstype, ts = m.timestamp()
            # librdkafka: 0 none, 1 create time, 2 log-append time; Spark: -1, 0, 1
            out.append((m.partition(), m.offset(), m.key(), m.value(),
                        [(k, v) for k, v in (m.headers() or [])], ts, tstype - 1))
    finally:
        c.close()
    return sorted(out)


def spark_rows(df: Any) -> list[tuple]:
    """The DataFrame's rows in confluent_read's form (fences left out)."""
    cols = df.columns
    out = []
    for r in df.collect():
        if r["value"] is not None and bytes(r["value"]) == FENCE:
            continue
        headers = [(h["key"], None if h["value"] is None else bytes(h["value"]))
                   for h in (r["headers"] or [])] if "headers" in cols else []
        ts = r["timestamp"]
        ms = int(ts.timestamp() * 1000 + 0.5) if ts is not None else None
        out.append((r["partition"], r["offset"],
                    None if r["key"] is None else bytes(r["key"]),
                    None if r["value"] is None else bytes(r["value"]), headers, ms,
                    r["timestampType"]))
    return sorted(out)
