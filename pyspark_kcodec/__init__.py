"""Spark finds this module by its name (``pyspark_*``) and registers its ``DefaultSource``:
``spark.read.format("kcodec")`` works in every session once kcodec[spark] is installed in
the Python that Spark's workers run. Spark's lookup imports it in such a worker; where kcodec
cannot be loaded there, the ImportError says which Python that is and what to set (Spark
logs it and skips its lookup). Without pyspark it does nothing (no Spark to look for it)."""

import importlib.util
import sys


def cannot_load(exc: ImportError) -> ImportError:
    """The error for a Spark worker's Python that has pyspark but not kcodec[spark]."""
    what = f"which lacks {exc.name}" if exc.name else f"({exc})"
    return ImportError(
        f"kcodec's Spark data sources cannot be loaded in {sys.executable}, {what}: Spark runs "
        "its Python workers with PYSPARK_PYTHON (python3 from PATH when it is not set); set "
        "PYSPARK_PYTHON to the Python where kcodec[spark] is installed before the session "
        "starts, or call kcodec.spark.register(spark)", name=exc.name)


if importlib.util.find_spec("pyspark") is not None:
    try:
        from kcodec.spark.source import KafkaSource as DefaultSource  # noqa: F401
    except ImportError as exc:
        raise cannot_load(exc) from exc
