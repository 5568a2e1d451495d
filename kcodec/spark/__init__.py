"""kcodec.spark: Spark's Kafka source, sink and a log-segment source, in pure PySpark.

    pip install 'kcodec[spark]'            # pyspark >= 4.0 and pyarrow; Java 17+ for Spark

    import kcodec.spark
    kcodec.spark.register(spark)           # formats "kcodec" and "kcodec-log"
    df = (spark.read.format("kcodec")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())                         # key, value, topic, partition, offset, ...
    df.write.format("kcodec").option("kafka.bootstrap.servers", ...).option("topic", "out").save()
    spark.read.format("kcodec-log").load("/var/lib/kafka/data/orders-3")

Spark also finds the formats without ``register``: its data source lookup imports the
top-level modules ``pyspark_kcodec`` and ``pyspark_kcodec_log``, in the Python its workers
run (PYSPARK_PYTHON, or python3 from PATH), so only where that Python has kcodec[spark].
Same schema, option names and semantics as Spark's built-in Kafka connector, no JVM jar:
records move as Arrow batches decoded by kcodec (``decode_columns(layout="spark")``).
"""

from __future__ import annotations

import sys
from typing import Any

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
    import pyspark.sql.datasource  # noqa: F401
except ImportError as exc:   # pragma: no cover - depends on the environment
    raise ImportError(
        f"kcodec.spark needs pyspark >= 4.0 and pyarrow, and {sys.executable} lacks "
        f"{exc.name or exc}: pip install 'kcodec[spark]' there (Spark's Python workers run "
        "PYSPARK_PYTHON, or python3 from PATH when it is not set: that must be a Python "
        "where kcodec[spark] is installed)", name=exc.name
    ) from exc

from kcodec.spark.logsource import KafkaLogSource
from kcodec.spark.source import KafkaSource
from kcodec.spark.taskmetrics import TaskMetrics

__all__ = ["KafkaSource", "KafkaLogSource", "TaskMetrics", "register"]


def _found_by_spark(spark: Any, name: str) -> bool:
    """Whether Spark's own lookup registered ``name`` in this session (then registering it
    again only replaces it, with a warning)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists(name))
    except Exception:    # Spark Connect, or another Spark: register anyway
        return False


def register(spark: Any) -> None:
    """Register the ``kcodec`` and ``kcodec-log`` formats in ``spark`` (a SparkSession),
    wherever kcodec is installed (an editable install, a checkout, any directory).

    In a local session whose workers' Python nobody chose (neither PYSPARK_PYTHON nor
    ``spark.pyspark.python`` is set), the Python workers of this session run this
    interpreter from now on; one chosen with PYSPARK_PYTHON is checked first, and a
    ``WorkerPythonError`` (an ImportError) says what it lacks and what to set.
    """
    from kcodec.spark import workers

    workers.choose(spark)
    # What Spark's lookup found runs the Python of Spark's JVM environment, without
    # spark.pyspark.python, archives or --py-files: kept only where that is the Python a
    # registered format gets (registering again replaces it, with a warning in Spark's log)
    keep = workers.lookup_matches(spark)
    for source in (KafkaSource, KafkaLogSource):
        if not (keep and _found_by_spark(spark, source.name())):
            spark.dataSource.register(source)
