"""The Python that Spark's workers run (kcodec/spark/workers.py), and the errors that name it
when it cannot load kcodec's data sources. Fake sessions: no JVM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

from kcodec.spark import workers  # noqa: E402
from tests.support import REPO  # noqa: E402


class FakeContext:
    def __init__(self, master: str, conf: dict[str, str] | None = None,
                 python: str = "python3") -> None:
        self.master = master
        self.conf = conf or {}
        self.pythonExec = python

    def getConf(self) -> FakeContext:
        return self

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.conf.get(key, default)


class FakeSession:
    def __init__(self, sc: FakeContext) -> None:
        self.sparkContext = sc


def test_a_local_session_nobody_chose_a_python_for_runs_this_one(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    sc = FakeContext("local[2]")
    assert workers.choose(FakeSession(sc)) == sys.executable
    assert sc.pythonExec == sys.executable


def test_a_chosen_python_is_left_alone(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    sc = FakeContext("local[*]", {"spark.pyspark.python": "/opt/py/bin/python"})
    workers.choose(FakeSession(sc))
    assert sc.pythonExec == "python3"           # the conf is Spark's to apply
    sc = FakeContext("spark://cluster:7077")    # a cluster: checked, never changed
    assert workers.choose(FakeSession(sc)) == "python3" and sc.pythonExec == "python3"
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    sc = FakeContext("local", python=sys.executable)
    assert workers.choose(FakeSession(sc)) == sys.executable


def test_a_chosen_python_that_lacks_kcodec_spark_is_named_with_what_to_set(
        monkeypatch, tmp_path) -> None:
    # a Python like the system's: this interpreter, but pyarrow cannot be imported
    fake = tmp_path / "python3"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c "
                    "'import sys; sys.modules[\"pyarrow\"] = None; exec(sys.argv[1])' \"$2\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PYSPARK_PYTHON", str(fake))
    sc = FakeContext("local[2]", python=str(fake))
    with pytest.raises(workers.WorkerPythonError) as e:
        workers.choose(FakeSession(sc))
    text = str(e.value)
    assert f"Spark's Python workers would run {fake}" in text
    assert "lacks pyarrow" in text and "set PYSPARK_PYTHON" in text
    assert sys.executable in text       # the one that has it
    assert isinstance(e.value, ImportError)
    # a Python that is not there at all
    sc = FakeContext("local[2]", python=str(tmp_path / "nothing"))
    with pytest.raises(workers.WorkerPythonError, match="cannot be started"):
        workers.choose(FakeSession(sc))


@pytest.mark.parametrize("module", ["pyspark_kcodec", "pyspark_kcodec_log"])
def test_spark_lookup_in_a_python_without_pyarrow_says_what_to_set(module) -> None:
    """What Spark's lookup worker meets in a Python with kcodec and pyspark but no pyarrow
    (the checkout's directory on sys.path, the system's python3): an ImportError naming
    the interpreter, what it lacks and PYSPARK_PYTHON, not a quiet 'data source not found'
    or a ModuleNotFoundError inside pyspark's planning worker."""
    code = f"import sys; sys.modules['pyarrow'] = None; import {module}"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "KCODEC_NO_EXTENSIONS": "1"})
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1
    assert last.startswith(f"ImportError: kcodec's Spark data sources cannot be loaded in "
                           f"{sys.executable}, which lacks pyarrow: Spark runs its Python "
                           "workers with PYSPARK_PYTHON"), last
    assert "kcodec.spark.register(spark)" in last


def test_without_pyspark_the_lookup_modules_do_nothing(tmp_path: Path) -> None:
    code = "import sys; sys.modules['pyspark'] = None; import pyspark_kcodec, pyspark_kcodec_log"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_cluster_python_the_driver_cannot_start_is_named(monkeypatch, tmp_path) -> None:
    # --archives venv.tar.gz#env with spark.pyspark.python=./env/bin/python: the executors
    # have ./env, the driver (which plans Python data sources) does not
    monkeypatch.chdir(tmp_path)
    sc = FakeContext("spark://cluster:7077", python="./env/bin/python")
    with pytest.raises(workers.WorkerPythonError) as e:
        workers.choose(FakeSession(sc))
    text = str(e.value)
    assert "./env/bin/python" in text and str(tmp_path) in text
    assert "tar -xzf venv.tar.gz -C env" in text
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to(sys.executable)
    assert workers.choose(FakeSession(sc)) == "./env/bin/python"
    sc = FakeContext("spark://cluster:7077", python=str(tmp_path / "nowhere" / "python"))
    with pytest.raises(workers.WorkerPythonError, match="cannot be started on the driver"):
        workers.choose(FakeSession(sc))


def test_spark_found_formats_are_kept_only_where_they_run_the_sessions_python(
        monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    sc = FakeContext("spark://cluster:7077", python=sys.executable)
    assert workers.lookup_matches(FakeSession(sc))
    # spark.pyspark.python (an archive's interpreter): the lookup's Python is another one
    sc = FakeContext("spark://cluster:7077", python="./env/bin/python")
    assert not workers.lookup_matches(FakeSession(sc))
    # --py-files: only a registered format ships them
    sc = FakeContext("spark://cluster:7077", python=sys.executable)
    sc._python_includes = ["deps.zip"]   # type: ignore[attr-defined]
    assert not workers.lookup_matches(FakeSession(sc))

    class Connect:       # Spark Connect: no SparkContext on the client
        @property
        def sparkContext(self):
            raise RuntimeError("not on Spark Connect")

    assert not workers.lookup_matches(Connect())


def test_pure_python_twins_are_reported_once_per_executor(monkeypatch, tmp_path, capsys
                                                          ) -> None:
    import kcodec
    import kcodec._impl

    monkeypatch.setattr(kcodec, "IMPLEMENTATION", "python")
    # as on an executor given kcodec in a zip (--py-files): the compiled twins cannot load
    monkeypatch.setattr(kcodec._impl, "EXTENSION_ERROR", "No module named 'kcodec._cy.crc'")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    monkeypatch.setattr(workers, "_WARNED", False)
    workers.warn_if_pure()
    workers.warn_if_pure()
    err = capsys.readouterr().err
    assert err.count("runs kcodec's pure-Python twins") == 1
    assert "2-3x slower" in err and "docs/guide/spark.md: Running on a cluster" in err and "kcodec._cy.crc" in err
    monkeypatch.setattr(kcodec._impl, "EXTENSION_ERROR", "disabled by KCODEC_NO_EXTENSIONS")
    assert "Unset KCODEC_NO_EXTENSIONS" in workers.pure_python_message()
    # another Python worker of the same executor (a new process): the mark says it was told
    monkeypatch.setattr(workers, "_WARNED", False)
    workers.warn_if_pure()
    assert capsys.readouterr().err == ""
    assert (tmp_path / workers.MARK).exists()
    # compiled: nothing to say
    monkeypatch.setattr(kcodec, "IMPLEMENTATION", "cython")
    monkeypatch.setattr(workers, "_WARNED", False)
    (tmp_path / workers.MARK).unlink()
    workers.warn_if_pure()
    assert capsys.readouterr().err == ""
