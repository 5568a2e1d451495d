"""Which Python Spark's Python workers run, and whether kcodec's data sources load there.

Everything a Python data source does (planning, reading, writing) runs in Python worker
processes that Spark starts with ``PYSPARK_PYTHON``, or ``python3`` from PATH when that is
not set: not necessarily the interpreter of the driver. Started with ``.venv/bin/python``
and no PYSPARK_PYTHON, a session's workers run the system's ``python3``, which has neither
kcodec nor pyarrow.

``choose(spark)`` (called by ``kcodec.spark.register``) points a local session whose
workers' Python nobody chose at the driver's interpreter, and checks a chosen one on this
machine before Spark finds out with a traceback inside a worker. On a cluster it checks
that the session's Python can be started on the driver too: Spark plans Python data
sources there, with the interpreter it gives the executors.

``lookup_matches(spark)`` says whether the formats Spark registered by itself (its lookup
of ``pyspark_*`` modules) run the same Python as registered ones would: Spark gives those
the Python of its JVM's environment, never ``spark.pyspark.python``, ``--archives`` or
``--py-files``.

``warn_if_pure()`` (called by every task of the source and the sink) says once per
executor, on its stderr, that kcodec runs its pure-Python twins there.
``check_executors(spark)`` runs one small job that reports, per executor, the Python and
the kcodec implementation the session's Python workers have.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from typing import Any

__all__ = ["choose", "advice", "lookup_matches", "warn_if_pure",
           "pure_python_message", "check_executors", "WorkerPythonError"]

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


def _jvm_value(sc: Any, what: str, name: str) -> str | None:
    """A system property or environment variable of the driver's JVM (None: unknown)."""
    try:
        system = sc._jvm.java.lang.System
        v = system.getProperty(name) if what == "property" else system.getenv(name)
    except Exception:     # noqa: BLE001 - no JVM here (tests' fakes): this process's view
        v = os.getcwd() if (what, name) == ("property", "user.dir") else os.environ.get(name)
    return None if v is None else str(v)


def _runnable(exe: str, cwd: str) -> bool:
    """Whether ``exe`` can be started by a process in ``cwd`` (a path with a slash is taken
    relative to ``cwd``, a bare name is looked up on PATH)."""
    if os.sep in exe or (os.altsep and os.altsep in exe):
        path = exe if os.path.isabs(exe) else os.path.join(cwd, exe)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    return shutil.which(exe) is not None


def choose(spark: Any) -> str | None:
    """The Python of the session's Python workers. For a local session: made the driver's
    when neither PYSPARK_PYTHON nor ``spark.pyspark.python`` chose one, and checked
    otherwise (a ``WorkerPythonError`` names the interpreter, what it lacks and what to
    set). For a cluster: checked that the driver can start it, since Spark plans Python
    data sources on the driver with the interpreter it gives the executors. None for
    Spark Connect (the server's Python is the server's to set)."""
    try:
        sc = spark.sparkContext
        master = sc.master
    except Exception:   # Spark Connect: no SparkContext on this side
        return None
    if not str(master).startswith("local"):
        return _check_cluster(sc)
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


def _check_cluster(sc: Any) -> str:
    exe = str(sc.pythonExec)
    cwd = _jvm_value(sc, "property", "user.dir") or os.getcwd()
    if _runnable(exe, cwd):
        return exe
    if not os.path.isabs(exe) and (os.sep in exe):
        top = exe.lstrip("./").split("/", 1)[0]
        raise WorkerPythonError(
            f"the session's Python is {exe} (spark.pyspark.python or PYSPARK_PYTHON), which "
            f"does not exist in the driver's working directory {cwd}: Spark starts that same "
            "interpreter on the driver to plan Python data sources such as kcodec's, not "
            "only on the executors. With --archives venv.tar.gz#" + top + ", unpack the "
            f"archive there too (mkdir {top} && tar -xzf venv.tar.gz -C {top}) and submit "
            "from that directory, or install the venv at the same absolute path on every "
            "machine and set spark.pyspark.python to it")
    raise WorkerPythonError(
        f"the session's Python is {exe} (spark.pyspark.python or PYSPARK_PYTHON), which "
        "cannot be started on the driver: Spark starts that same interpreter on the driver "
        "to plan Python data sources such as kcodec's, not only on the executors. Install "
        "it at that path on the driver as on the executors, or set spark.pyspark.python to "
        "a Python both have")


def _lookup_python(sc: Any) -> str:
    """The Python that Spark gives the formats its own lookup found: its JVM's
    PYSPARK_DRIVER_PYTHON, else PYSPARK_PYTHON, else python3."""
    return (_jvm_value(sc, "env", "PYSPARK_DRIVER_PYTHON")
            or _jvm_value(sc, "env", "PYSPARK_PYTHON") or "python3")


def lookup_matches(spark: Any) -> bool:
    """Whether the formats Spark's lookup registered run the Python that ``register``
    would give them: the session's own (``sc.pythonExec``) and no ``--py-files``. False
    for Spark Connect, where nothing of this is known on the client."""
    try:
        sc = spark.sparkContext
        session_exe = str(sc.pythonExec)
    except Exception:     # noqa: BLE001 - Spark Connect
        return False
    if getattr(sc, "_python_includes", None):
        return False        # shipped with --py-files: only a registered format has them
    exe = _lookup_python(sc)
    if exe == session_exe:
        return True
    if os.path.isabs(exe) and os.path.isabs(session_exe):
        return _same(exe, session_exe)
    if str(sc.master).startswith("local"):     # one machine: the same file is the same
        a, b = shutil.which(exe), shutil.which(session_exe)
        return bool(a and b and _same(a, b))
    return False


# ---------------------------------------------------------------------------------------------
# on the executors

_WARNED = False
#: the file that marks an executor as told (in its first SPARK_LOCAL_DIRS directory, which
#: the executor makes at start and removes at exit)
MARK = "kcodec-pure-python-warned"


def pure_python_message() -> str:
    from kcodec._impl import EXTENSION_ERROR

    host = socket.gethostname()
    why = EXTENSION_ERROR or "the compiled extension is not built"
    text = (f"kcodec: warning: this Spark executor ({host}, Python {sys.executable}) runs "
            f"kcodec's pure-Python twins ({why}): the kcodec source and sink give the same "
            "results, 2-3x slower. ")
    if "KCODEC_NO_EXTENSIONS" in why:
        return text + "Unset KCODEC_NO_EXTENSIONS in the executors' environment."
    return text + ("Install kcodec from a wheel in the Python the executors run (see the "
                   "Spark guide, docs/guide/spark.md: Running on a cluster): code shipped "
                   "with --py-files or as a zip cannot load compiled modules.")


def _first_in_executor() -> bool:
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d]
    if not dirs:
        return True          # not in a Spark worker: once per process
    try:
        fd = os.open(os.path.join(dirs[0], MARK), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True
    os.close(fd)
    return True


def warn_if_pure() -> None:
    """On the pure-Python twins: say so on stderr (the executor's log), once per executor
    (Python workers come and go; a mark in the executor's local directory remembers)."""
    global _WARNED
    from kcodec import IMPLEMENTATION

    if IMPLEMENTATION != "python" or _WARNED:
        return
    _WARNED = True
    if _first_in_executor():
        print(pure_python_message(), file=sys.stderr, flush=True)


def _report(batches: Any) -> Any:
    """One row per task: host, Python, kcodec's version and implementation, or the error
    that kept kcodec from loading. Pickled by value (a nested copy is made below), so that
    an executor without kcodec can run it and say so."""
    import socket as _socket
    import sys as _sys

    import pyarrow as _pa

    for _ in batches:
        row = {"host": _socket.gethostname(), "python": _sys.executable, "kcodec": "",
               "implementation": "", "error": ""}
        try:
            import kcodec as _k
            import kcodec.spark  # noqa: F401

            row["kcodec"] = _k.__version__
            row["implementation"] = _k.IMPLEMENTATION
        except Exception as exc:   # noqa: BLE001 - reported, not raised
            row["error"] = f"{type(exc).__name__}: {exc}"
        yield _pa.RecordBatch.from_pylist([row])


def check_executors(spark: Any, tasks: int | None = None) -> list[dict[str, str]]:
    """Run one small job (``tasks`` tasks: by default the session's default parallelism)
    in the session's Python workers and report, per distinct (host, Python): kcodec's
    version and implementation. A ``WorkerPythonError`` names every place where kcodec
    cannot be loaded. Works with Spark Connect (the server's executors)."""
    import types

    if tasks is None:
        try:
            tasks = int(spark.sparkContext.defaultParallelism)
        except Exception:     # noqa: BLE001 - Spark Connect
            tasks = 4
    tasks = max(1, tasks)
    # a copy of _report that cloudpickle ships by value: importing kcodec on the executor
    # is what is being checked, so unpickling the function must not need it
    fn = types.FunctionType(_report.__code__, {"__builtins__": __builtins__},
                            "kcodec_check_executors")
    fn.__module__ = "__main__"
    schema = "host string, python string, kcodec string, implementation string, error string"
    rows = spark.range(0, tasks, 1, tasks).mapInArrow(fn, schema).collect()
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        seen.setdefault((r["host"], r["python"]), r.asDict())
    out = sorted(seen.values(), key=lambda d: (d["host"], d["python"]))
    bad = [d for d in out if d["error"]]
    if bad:
        where = "; ".join(f"{d['host']}: {d['python']} ({d['error']})" for d in bad)
        raise WorkerPythonError(
            f"kcodec cannot be loaded by the session's Python workers: {where}. Install "
            "kcodec[spark] in the Python the executors run (spark.pyspark.python, or "
            "PYSPARK_PYTHON), or ship a packed venv with --archives (Spark guide, docs/"
            "guide/spark.md: Running on a cluster), and call kcodec.spark.register(spark)")
    return out
