"""The install lines of the README and getting-started work as written, from this checkout:
``scripts/wheel`` then an offline ``pip install --no-index --find-links dist``, and ``pip
install '.[compat]'``, each into a fresh venv where ``kcodec`` then runs with its compiled
twins. (``scripts/run`` and its activate line: tests/scripts/test_run.py.) Slow: each builds
the extension."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (REPO / "scripts" / "wheel").is_file(), reason="needs a checkout"),
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
]


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path / "bin"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "KCODEC_NO_EXTENSIONS", "VIRTUAL_ENV")}


def _works(bin_: Path) -> None:
    p = subprocess.run([str(bin_ / "kcodec"), "info", "--json"], capture_output=True, text=True,
                       timeout=120, cwd="/", env=_env())
    assert p.returncode == 0, p.stderr
    assert '"implementation":"cython"' in p.stdout.replace(" ", ""), p.stdout


def test_the_docs_say_these_lines() -> None:
    for doc in ("README.md", "docs/getting-started.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        assert re.search(r"scripts/wheel", text) and "--no-index --find-links dist" in text, doc
        assert not re.search(r"^\$ pip install kcodec\b", text, re.M), doc


def test_a_wheel_from_scripts_then_an_offline_install(tmp_path) -> None:
    dist = tmp_path / "dist"
    p = subprocess.run(["bash", str(REPO / "scripts" / "wheel")], cwd=REPO, timeout=1800,
                       env={**_env(), "KCODEC_DIST": str(dist), "PYTHON": sys.executable},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-4000:]
    assert list(dist.glob("kcodec-*.whl")), sorted(x.name for x in dist.iterdir())
    bin_ = _venv(tmp_path / "venv")
    p = subprocess.run([str(bin_ / "pip"), "install", "--no-index", "--find-links", str(dist),
                        "kcodec"], capture_output=True, text=True, timeout=600, env=_env())
    assert p.returncode == 0, p.stderr[-4000:]
    _works(bin_)


def test_pip_install_from_the_checkout_with_an_extra(tmp_path) -> None:
    bin_ = _venv(tmp_path / "venv")
    p = subprocess.run([str(bin_ / "pip"), "install", ".[compat]"], cwd=REPO, capture_output=True,
                       text=True, timeout=1800, env=_env())
    assert p.returncode == 0, p.stderr[-4000:]
    _works(bin_)
    p = subprocess.run([str(bin_ / "python"), "-c", "import kafka, aiokafka, kcodec.compat"],
                       capture_output=True, text=True, timeout=120, cwd="/", env=_env())
    assert p.returncode == 0, p.stderr
