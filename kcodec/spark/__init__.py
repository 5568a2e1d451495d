"""kcodec.spark: Spark's Kafka source, sink and a log-segment source, in pure PySpark.

    pip install 'kcodec[spark]'            # pyspark >= 4.0 and pyarrow; Java 17+ for Spark

    df = (spark.read.format("kcodec")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())                         # key, value, topic, partition, offset, ...
    df.write.format("kcodec").option("kafka.bootstrap.servers", ...).option("topic", "out").save()
    spark.read.format("kcodec-log").load("/var/lib/kafka/data/orders-3")

The formats are registered automatically when kcodec[spark] is installed (the top-level
modules ``pyspark_kcodec`` and ``pyspark_kcodec_log`` are found by Spark's data source
lookup), and by ``register(spark)`` in any session. Same schema, option names and
semantics as Spark's built-in Kafka connector, no JVM jar: records move as Arrow batches
decoded by kcodec (``decode_columns(layout="spark")``).
"""

from __future__ import annotations

from typing import Any

try:
    import pyspark  # noqa: F401
    import pyspark.sql.datasource  # noqa: F401
except ImportError as exc:   # pragma: no cover - depends on the environment
    raise ImportError(
        "kcodec.spark needs pyspark >= 4.0 and pyarrow: pip install 'kcodec[spark]'"
    ) from exc

from kcodec.spark.logsource import KafkaLogSource
from kcodec.spark.source import KafkaSource

__all__ = ["KafkaSource", "KafkaLogSource", "register"]


def register(spark: Any) -> None:
    """Register the ``kcodec`` and ``kcodec-log`` formats in ``spark`` (a SparkSession)."""
    spark.dataSource.register(KafkaSource)
    spark.dataSource.register(KafkaLogSource)
