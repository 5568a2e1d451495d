"""The Python data sources the Spark benchmarks compare kcodec's with (importable on Spark's
Python workers: the benchmark puts the repository on their PYTHONPATH).

* ``confluent-bench``: a Kafka source written the way users write one today -- one task per
  partition, a confluent-kafka Consumer reading its range, yielding one tuple per record.
* ``memory-bench``: the same rows made up in memory as Arrow batches of Spark's schema
  (no Kafka at all): the floor of any Python source, Spark's own cost of taking Arrow.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kcodec.spark.schema import kafka_schema


class ConfluentSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "confluent-bench"

    def schema(self) -> Any:
        return kafka_schema(False)

    def reader(self, schema: Any) -> DataSourceReader:
        return ConfluentReader(self.options)


class ConfluentReader(DataSourceReader):
    def __init__(self, options: Any) -> None:
        self.bootstrap = options["kafka.bootstrap.servers"]
        self.topic = options["subscribe"]
        self.partitions_n = int(options["partitions"])
        self.ends = [int(x) for x in options["ends"].split(",")]

    def partitions(self) -> list[InputPartition]:
        return [InputPartition((p, self.ends[p])) for p in range(self.partitions_n)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        import confluent_kafka

        p, end = partition.value
        c = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap,
                                      "group.id": "bench", "enable.auto.commit": False,
                                      "fetch.wait.max.ms": 50})
        c.assign([confluent_kafka.TopicPartition(self.topic, p, 0)])
        utc = dt.timezone.utc
        try:
            pos = 0
            while pos < end:
                for m in c.consume(10000, 1.0):
                    if m.error():
                        raise RuntimeError(str(m.error()))
                    tstype, ts = m.timestamp()
                    pos = m.offset() + 1
                    if m.offset() >= end:
                        continue
                    yield (m.key(), m.value(), m.topic(), m.partition(), m.offset(),
                           dt.datetime.fromtimestamp(ts / 1000, utc), tstype - 1)
        finally:
            c.close()


class MemorySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "memory-bench"

    def schema(self) -> Any:
        return kafka_schema(False)

    def reader(self, schema: Any) -> DataSourceReader:
        return MemoryReader(self.options)


class MemoryReader(DataSourceReader):
    def __init__(self, options: Any) -> None:
        self.topic = options["subscribe"]
        self.partitions_n = int(options["partitions"])
        self.per = int(options["per_partition"])

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in range(self.partitions_n)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        from kcodec._columnar import spark_schema

        p = partition.value
        schema = spark_schema(False)
        step = 50_000
        name = self.topic.encode()

        def fixed(typ: Any, width: int, n: int, fill: bytes) -> Any:
            offs = np.arange(n + 1, dtype=np.int32) * width
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offs),
                                                  pa.py_buffer(fill * n)])

        for lo in range(0, self.per, step):
            n = min(step, self.per - lo)
            keys = fixed(pa.binary(), 16, n, b"k" * 16)
            values = fixed(pa.binary(), 100, n, b"v" * 100)
            topics = fixed(pa.string(), len(name), n, name)
            yield pa.RecordBatch.from_arrays([
                keys, values, topics, pa.array(np.full(n, p, dtype=np.int32)),
                pa.array(np.arange(lo, lo + n, dtype=np.int64)),
                pa.array(np.full(n, 1_700_000_000_000_000, dtype=np.int64),
                         pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, dtype=np.int32))], schema=schema)
