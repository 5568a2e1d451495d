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

    source.py         the ``kcodec`` data source: Spark's Kafka source and sink, in Python
    stream.py         ``spark.readStream.format("kcodec")``: the micro-batch source
    sink.py           ``df.write``/``df.writeStream.format("kcodec")``: Spark's Kafka sink
    transactional.py  the exactly-once sink: a two-phase-commit transaction a task (KIP-939)
    logsource.py      ``spark.read.format("kcodec-log")``: Kafka log directories read offline
    _kafka.py         the Kafka side, without pyspark: offset ranges planned, read as Arrow
    options.py        the options, read as Spark's Kafka connector reads them
    schema.py         Spark schemas of the ``kcodec`` and ``kcodec-log`` sources
    pushdown.py       filter pushdown of the batch source (pyspark >= 4.1)
    groups.py         committing a streaming query's progress to a consumer group
    security.py       Spark's ``kafka.*`` security options, as kcodec's client settings
    reach.py          which brokers this machine can reach, and an error naming the cause
    taskmetrics.py    what each task did: records, bytes, requests and their latency, seconds
    workers.py        which Python Spark's workers run, and whether kcodec's sources load there
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
