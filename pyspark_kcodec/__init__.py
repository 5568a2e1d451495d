"""Spark finds this module by its name (``pyspark_*``) and registers its ``DefaultSource``:
``spark.read.format("kcodec")`` works in every session once kcodec[spark] is installed.
Without pyspark it does nothing (Spark is not there to look for it)."""

try:
    from kcodec.spark.source import KafkaSource as DefaultSource  # noqa: F401
except ImportError:   # pragma: no cover - kcodec installed without the spark extra
    pass
