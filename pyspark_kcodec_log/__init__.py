"""Spark registers this module's ``DefaultSource`` as ``format("kcodec-log")`` (one data
source per ``pyspark_*`` module); see pyspark_kcodec."""

try:
    from kcodec.spark.logsource import KafkaLogSource as DefaultSource  # noqa: F401
except ImportError:   # pragma: no cover - kcodec installed without the spark extra
    pass
