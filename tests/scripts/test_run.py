"""scripts/run: one compile of the extension with a line per module, the extras every
quickstart needs (compat included), and, at the end, the line that puts ``kcodec`` on PATH.
Run with a fake venv whose ``python`` records how it was called (pip and setup.py are
faked; ``-m kcodec`` runs the real command)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = [
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
    pytest.mark.skipif(not (REPO / "scripts" / "run").is_file(),
                       reason="needs a checkout's scripts/ (not there beside an installed wheel)"),
]


def _venv(tmp_path: Path, build: str = "ok") -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("# fake\n")
    log = tmp_path / "calls"
    builds = {
        "ok": 'echo "Compiling kcodec/_cy/varint.pyx because it changed."; '
              'echo "[1/2] Cythonizing kcodec/_cy/varint.pyx"; '
              "echo \"building 'kcodec._cy.varint' extension\"; echo \"gcc -O3 ...\"; "
              "echo \"building 'kcodec._cy.crc' extension\"; exit 0",
        "fail": "echo \"building 'kcodec._cy.varint' extension\"; "
                'echo "kcodec/_cy/varint.c:1:1: error: boom"; echo "error: command gcc failed"; '
                "exit 1",
    }
    (venv / "bin" / "python").write_text(f"""#!/usr/bin/env bash
echo "NOEXT=${{KCODEC_NO_EXTENSIONS:-}} $*" >> {log}
case "$1 $2" in
    "-m pip") exit 0 ;;
    "setup.py build_ext") {builds[build]} ;;
    "-m kcodec") exec {sys.executable} "$@" ;;
esac
exit 3
""")
    (venv / "bin" / "python").chmod(0o755)
    return venv


def _run(tmp_path: Path, venv: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KCODEC_NO_EXTENSIONS", "KCODEC_INSTALL_SYSTEM_PACKAGES")}
    env.update(KCODEC_VENV=str(venv), PYTHONPATH=str(REPO))
    return subprocess.run(["bash", str(REPO / "scripts" / "run"), *argv], env=env,
                          capture_output=True, text=True, timeout=120)


def test_run_installs_without_compiling_then_compiles_once_and_says_how_to_get_on_path(
        tmp_path) -> None:
    venv = _venv(tmp_path)
    r = _run(tmp_path, venv, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kcodec ")
    calls = (tmp_path / "calls").read_text().splitlines()
    editable = [c for c in calls if " -e " in c]
    assert len(editable) == 1 and editable[0].startswith("NOEXT=1 ")   # no compile in pip
    assert "compat" in editable[0].split(" -e ", 1)[1]                # the compat quickstart's extra
    assert sum("setup.py build_ext" in c for c in calls) == 1         # the one compile
    assert "kcodec: translating kcodec/_cy/varint.pyx to C" in r.stderr
    assert "kcodec: compiling kcodec._cy.varint (1/" in r.stderr
    assert "kcodec: compiling kcodec._cy.crc (2/" in r.stderr
    assert "gcc -O3" not in r.stderr                                   # the compiler's noise
    assert r.stderr.splitlines()[-1] == \
        f"kcodec: to run kcodec from your shell: . {venv}/bin/activate"


def test_the_path_line_comes_after_a_failing_command_too(tmp_path) -> None:
    venv = _venv(tmp_path)
    r = _run(tmp_path, venv, "no-such-command")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1].endswith(f". {venv}/bin/activate")


def test_a_failed_compile_shows_the_compiler_output_and_stops(tmp_path) -> None:
    venv = _venv(tmp_path, build="fail")
    r = _run(tmp_path, venv, "--version")
    assert r.returncode != 0
    assert "compiling the extension failed" in r.stderr
    assert "varint.c:1:1: error: boom" in r.stderr
    assert not r.stdout


def test_the_runtime_state_directory_is_ignored() -> None:
    r = subprocess.run(["git", "check-ignore", "-q", "kcodec-run/control.sock"], cwd=REPO)
    assert r.returncode == 0, "kcodec run's ./kcodec-run/ is not in .gitignore"
