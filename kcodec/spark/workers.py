"""Which Python Spark's Python workers run, and whether kcodec's data sources load there.

Everything a Python data source does (planning, reading, writing) runs in Python worker
processes that Spark starts with ``PYSPARK_PYTHON``, or ``python3`` from PATH when that is
not set: not necessarily the interpreter of the driver. Started with ``.venv/bin/python``
and no PYSPARK_PYTHON, a session's workers run the system's ``python3``, which has neither
kcodec nor pyarrow.

``choose(spark)`` (called by ``kcodec.spark.register``) points a local session whose
workers' Python nobody chose at the driver's interpreter, and checks a chosen one on this
machine before Spark finds out with a traceback inside a worker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

__all__ = ["choose", "advice", "lookup_python_is_this", "WorkerPythonError"]

#: what a worker must import for kcodec's data sources
PROBE = "import kcodec.spark, pyarrow"


class WorkerPythonError(ImportError):
    """Spark's Python workers would run an interpreter that cannot load kcodec.spark."""


def advice() -> str:
    return ("Spark runs its Python workers with PYSPARK_PYTHON (python3 from PATH when it is "
            "not set): set PYSPARK_PYTHON to the Python where kcodec[spark] is installed "
            f"before the session starts (this one is {sys.executable}), or install it there "
            "with pip install 'kcodec[spark]'")


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def lookup_python_is_this() -> bool:
    """Whether Spark's data source lookup runs this interpreter: Spark's JVM takes
    PYSPARK_DRIVER_PYTHON, else PYSPARK_PYTHON, else python3 from PATH, from the
    environment it was started with (this process's, unless it changed since)."""
    exe = os.environ.get("PYSPARK_DRIVER_PYTHON") or os.environ.get("PYSPARK_PYTHON") or \
        shutil.which("python3")
    return bool(exe) and _same(str(exe), sys.executable)


def choose(spark: Any) -> str | None:
    """For a local session: the workers' Python, made the driver's when neither
    PYSPARK_PYTHON nor ``spark.pyspark.python`` chose one, and checked otherwise (a
    ``WorkerPythonError`` names the interpreter, what it lacks and what to set). Returns
    the interpreter, or None where there is nothing to do (a cluster, Spark Connect)."""
    try:
        sc = spark.sparkContext
        master = sc.master
    except Exception:   # Spark Connect: no SparkContext on this side
        return None
    if not str(master).startswith("local"):
        return None     # the workers are other machines: their Python is theirs to set
    env = os.environ.get("PYSPARK_PYTHON")
    if not env and not sc.getConf().get("spark.pyspark.python", None):
        # the Python that data sources and UDFs registered in this session from now on run
        sc.pythonExec = sys.executable
        return sys.executable
    exe = sc.pythonExec
    if not env:
        return exe      # spark.pyspark.python: Spark's to apply
    if _same(exe, sys.executable):
        return exe
    try:
        r = subprocess.run([exe, "-c", PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise WorkerPythonError(f"Spark's Python workers would run {exe!r}, which cannot be "
                                f"started ({exc}); {advice()}") from exc
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        why = lines[-1] if lines else f"exit status {r.returncode}"
        raise WorkerPythonError(f"Spark's Python workers would run {exe}, which cannot load "
                                f"kcodec's data sources ({why}); {advice()}")
    return exe
