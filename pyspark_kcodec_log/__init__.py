"""Spark registers this module's ``DefaultSource`` as ``format("kcodec-log")`` (one data
source per ``pyspark_*`` module); see pyspark_kcodec."""

import importlib.util

if importlib.util.find_spec("pyspark") is not None:
    from pyspark_kcodec import cannot_load

    try:
        from kcodec.spark.logsource import KafkaLogSource as DefaultSource  # noqa: F401
    except ImportError as exc:
        raise cannot_load(exc) from exc
