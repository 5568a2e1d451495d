"""Spark finds the ``kcodec`` and ``kcodec-log`` formats from any directory, in every way
kcodec can be installed: setuptools' editable modes (default, compat, strict) and a plain
``pip install``, each into a fresh virtual environment, from a copy of the project.

Spark's lookup (``pyspark/sql/worker/lookup_data_sources.py``, run here as Spark runs it)
lists the modules on sys.path with ``pkgutil.iter_modules`` and keeps the ``pyspark_*`` ones
with a ``DefaultSource``: setuptools' editable import hook answers imports but not that
listing, so before ``package-dir`` in pyproject.toml a default editable install was not
found outside the checkout. The slow test runs real Spark reads from another directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

from tests.support import REPO  # noqa: E402

pytestmark = pytest.mark.arrow

PROJECT = ["pyproject.toml", "setup.py", "README.md", "LICENSE", "MANIFEST.in",
           "pyspark_kcodec", "pyspark_kcodec_log"]

# Spark's own lookup, on a buffer instead of its socket: the names it would register
LOOKUP = textwrap.dedent("""
    import io, pickle, struct
    from pyspark.sql.worker import lookup_data_sources
    out = io.BytesIO()
    lookup_data_sources._main(io.BytesIO(), out)
    data = out.getvalue()
    n, pos, names = struct.unpack_from(">i", data)[0], 4, []
    for _ in range(n):
        size = struct.unpack_from(">i", data, pos)[0]
        names.append(data[pos + 4:pos + 4 + size].decode())
        pos += 4 + size
        size = struct.unpack_from(">i", data, pos)[0]
        source = pickle.loads(data[pos + 4:pos + 4 + size])
        pos += 4 + size
        import sys
        print(names[-1], sys.modules[source.__module__].__file__)
""")


def _copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in PROJECT:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)
    # the pure-Python build (KCODEC_NO_EXTENSIONS=1): no compiler, no compiled files
    shutil.copytree(REPO / "kcodec", dest / "kcodec", ignore=shutil.ignore_patterns(
        "__pycache__", "*.so", "*.pyd", "*.c", "*.html"))
    return dest


def _venv(where: Path) -> Path:
    """A fresh venv that borrows this one's packages (pyspark, pyarrow, pip, setuptools)
    through a .pth file, without kcodec: only what is installed into it provides that."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=120)
    python = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    Path(site.stdout.strip(), "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["KCODEC_NO_EXTENSIONS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _install(tmp_path: Path, *how: str) -> tuple[Path, Path]:
    project = _copy_project(tmp_path / "project")
    python = _venv(tmp_path / "venv")
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--disable-pip-version-check", *how,
                        str(project)], env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return python, project


def _looked_up(python: Path, cwd: Path) -> dict[str, str]:
    cwd.mkdir(exist_ok=True)
    r = subprocess.run([str(python), "-c", LOOKUP], cwd=cwd, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines())


def _check(found: dict[str, str], inside: Path) -> None:
    assert sorted(found) == ["kcodec", "kcodec-log"]
    for path in found.values():
        assert Path(path).resolve().is_relative_to(inside.resolve()), (path, inside)


def test_default_editable_install_is_found_from_another_directory(tmp_path) -> None:
    python, project = _install(tmp_path, "-e")
    _check(_looked_up(python, tmp_path / "elsewhere"), project)


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--config-settings", "editable_mode=compat", "-e"],
                                 ["--config-settings", "editable_mode=strict", "-e"],
                                 []], ids=["compat", "strict", "plain"])
def test_every_install_mode_is_found_from_another_directory(tmp_path, how) -> None:
    python, project = _install(tmp_path, *how)
    inside = project if how else python.parent.parent      # plain: the venv's site-packages
    _check(_looked_up(python, tmp_path / "elsewhere"), inside)


SPARK_READ = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pyspark.sql import SparkSession
    from kcodec.records import RecordBatchBuilder

    d = Path("t-0")
    d.mkdir()
    b = RecordBatchBuilder(compression=0, base_offset=0, max_size=1 << 20)
    for i in range(5):
        b.append(b"k", b"v%d" % i, [], timestamp=i)
    (d / ("0" * 20 + ".log")).write_bytes(bytes(b.build()))
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    if sys.argv[1:] == ["register"]:
        import kcodec.spark
        kcodec.spark.register(spark)
    print("rows", spark.read.format("kcodec-log").load(str(d)).count())
    spark.stop()
""")


@pytest.mark.slow     # two Spark sessions, ~40 s
def test_spark_reads_from_another_directory_with_an_editable_install(tmp_path) -> None:
    """Found by Spark itself where its workers run the venv's Python; found through
    ``register`` with no PYSPARK_PYTHON at all (the workers then run the driver's Python,
    not the ``python3`` on PATH)."""
    python, _ = _install(tmp_path, "-e")
    for n, (args, extra) in enumerate([([], {"PYSPARK_PYTHON": str(python)}),
                                       (["register"], {})]):
        cwd = tmp_path / f"elsewhere{n}"
        cwd.mkdir()
        env = {**_env(), **extra, "SPARK_LOCAL_IP": "127.0.0.1"}
        r = subprocess.run([str(python), "-c", SPARK_READ, *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and r.stdout.splitlines()[-1] == "rows 5", r.stderr[-3000:]
