"""mypy on a snippet of code, as the typing tests ask it: from the directory holding the
``kcodec`` under test (the checkout's root, or site-packages beside an installed wheel), Python 3.10 (the floor), imports followed silently, a
cache of the test's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kcodec


def mypy(tmp_path: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    """Run mypy on ``source`` written to ``tmp_path / name``; its answer (``.stdout`` names
    the file as ``name``)."""
    pytest.importorskip("mypy", reason="mypy comes with the test extra")
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    cmd = [sys.executable, "-m", "mypy", "--no-incremental", "--python-version", "3.10",
           "--follow-imports", "silent", "--cache-dir", str(tmp_path / "cache"), str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=str(Path(kcodec.__file__).resolve().parents[1]),
                          timeout=600)
