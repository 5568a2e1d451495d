"""The ``kcodec`` data source: Spark's Kafka source (batch and streaming) and sink, in Python.

    spark.read.format("kcodec").option("kafka.bootstrap.servers", "host:9092")
         .option("subscribe", "events").load()

Readers are pickled to the Python workers after planning: they hold options and offset
ranges only, and every ``read()`` makes its own client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from kcodec.spark import _kafka
from kcodec.spark._kafka import KafkaRange
from kcodec.spark.options import SourceOptions, parse_source
from kcodec.spark.schema import kafka_schema, same_schema

__all__ = ["KafkaSource", "KafkaBatchReader", "KafkaRangePartition"]


class KafkaRangePartition(InputPartition):
    """One task's offset range (``value`` is a ``KafkaRange``)."""

    def __init__(self, value: KafkaRange) -> None:
        super().__init__(value)


class KafkaSource(DataSource):
    """``format("kcodec")``: Spark's Kafka source and sink, read and written with kcodec."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``kcodec``."""
        return "kcodec"

    def _headers(self) -> bool:
        v = str(self.options.get("includeHeaders", "false")).strip().lower()
        return v == "true"

    def schema(self) -> StructType:
        """Spark's Kafka schema (with ``headers`` when ``includeHeaders`` is true)."""
        return kafka_schema(self._headers())

    def _check_schema(self, schema: StructType) -> None:
        if not same_schema(schema, kafka_schema(self._headers())):
            raise ValueError("the kcodec source has a fixed schema (Spark's Kafka schema) and "
                             "cannot be given another one: drop .schema(...)")

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader of ``spark.read``."""
        self._check_schema(schema)
        opts = parse_source(self.options, streaming=False)
        cls = KafkaPushdownReader if pushdown_enabled() else KafkaBatchReader
        return cls(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The stream reader of ``spark.readStream``."""
        self._check_schema(schema)
        from kcodec.spark.stream import make_stream_reader

        return make_stream_reader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """The sink of ``df.write`` (append only)."""
        from kcodec.spark.sink import KafkaWriter

        if overwrite:
            raise ValueError("save mode overwrite is not allowed for Kafka: a topic cannot be "
                             "replaced; allowed save modes are append and errorifexists")
        return KafkaWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """The sink of ``df.writeStream``."""
        from kcodec.spark.sink import make_stream_writer

        return make_stream_writer(self.options, schema)


# ---------------------------------------------------------------------------------------------
# batch reading


_ALL = (0, 1 << 63)


class KafkaBatchReader(DataSourceReader):
    """Plans offset ranges on the driver; each task reads one range as Arrow batches."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        # from pushed filters: allowed partitions (None: all), offset and timestamp bounds
        self.only_partitions: set[int] | None = None
        self.offset_lo, self.offset_hi = _ALL     # [lo, hi)
        self.ts_lo: int | None = None              # ms, inclusive
        self.ts_hi: int | None = None              # ms, exclusive

    def partitions(self) -> Sequence[InputPartition]:
        from kcodec.spark.pushdown import narrow

        ranges = _kafka.plan_ranges(self.opts)
        ranges = narrow(self, ranges)
        ranges = _kafka.split_ranges(ranges, self.opts.min_partitions,
                                     self.opts.max_records_per_partition)
        if not ranges:     # nothing to read: one empty task rather than none at all
            ranges = [KafkaRange("", 0, 0, 0)]
        return [KafkaRangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        r = partition.value
        if r.size:
            yield from _kafka.read_range(r, self.opts)


class KafkaPushdownReader(KafkaBatchReader):
    """The batch reader with filter pushdown (pyspark >= 4.1, when the session enables it:
    Spark refuses a reader that has ``pushFilters`` while pushdown is off)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from kcodec.spark.pushdown import push

        yield from push(self, filters)


def pushdown_enabled() -> bool:
    """Whether Spark asks for the reader with filter pushdown on
    (``spark.sql.python.filterPushdown.enabled``). pyspark tells no data source: with
    pushdown on it asks for the reader in its pushdown worker
    (``pyspark/sql/worker/data_source_pushdown_filters.py``), otherwise in the planning
    worker, which holds the flag in a local ``enable_pushdown``. Both are recognised by
    their frames (the workers run as ``__main__``); anything else means off (pushdown is an
    optimisation, never needed for correct results)."""
    import sys
    from types import FrameType

    f: FrameType | None = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if "pyspark" in name:
            if name.endswith("data_source_pushdown_filters.py"):
                return True
            flag = f.f_locals.get("enable_pushdown")
            if isinstance(flag, bool):
                return flag
        f = f.f_back
    return False
