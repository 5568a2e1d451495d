"""scripts/_setup.sh, the set-up that scripts/test, scripts/run and .ci/run share: system
packages only when asked, and pip's work shown while it happens. Run with bash, with fake
``dpkg-query``, ``apt-get`` and ``sudo`` first on PATH (they record how they were called)."""

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
    pytest.mark.skipif(not (REPO / "scripts" / "_setup.sh").is_file(),
                       reason="needs a checkout's scripts/ (not there beside an installed wheel)"),
]


def _fakes(tmp_path: Path, apt_status: int) -> Path:
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "calls"
    scripts = {
        # nothing is installed
        "dpkg-query": "exit 1",
        "apt-get": f'echo "apt-get $*" >> {log}; exit {apt_status}',
        "sudo": f'echo "sudo $*" >> {log}; "${{@:2}}"',
    }
    for name, body in scripts.items():
        (bin_ / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_ / name).chmod(0o755)
    return bin_


def _bash(script: str, tmp_path: Path, apt_status: int = 0, **env: str
          ) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "KCODEC_INSTALL_SYSTEM_PACKAGES"}
    environ["PATH"] = f"{_fakes(tmp_path, apt_status)}{os.pathsep}{environ['PATH']}"
    environ.update(env)
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . scripts/_setup.sh; {script}"],
                          cwd=REPO, env=environ, capture_output=True, text=True, timeout=60)


PACKAGES = 'kcodec_system_packages "stunnel4:the TLS terminator" "redis-server:the cache tests"'


def test_system_packages_are_only_named_unless_asked_for(tmp_path) -> None:
    r = _bash(PACKAGES, tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "calls").exists()           # apt-get never ran
    assert "not installed: stunnel4 (the TLS terminator) redis-server (the cache tests)" \
        in r.stderr
    assert "KCODEC_INSTALL_SYSTEM_PACKAGES=1" in r.stderr
    assert "sudo apt-get install stunnel4 redis-server" in r.stderr


def test_system_packages_are_installed_when_asked_for(tmp_path) -> None:
    r = _bash(PACKAGES, tmp_path, KCODEC_INSTALL_SYSTEM_PACKAGES="1")
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    apt = [c.split("apt-get ", 1)[1] for c in calls if c.startswith("apt-get")]
    assert apt == ["update -q", "install -y -q stunnel4 redis-server"]
    # as root directly, otherwise through sudo (never asking for a password)
    assert any(c.startswith("sudo -n") for c in calls) == (os.geteuid() != 0)


def test_a_failed_install_that_was_asked_for_stops_the_script(tmp_path) -> None:
    r = _bash(PACKAGES + "; echo went on", tmp_path, apt_status=100,
              KCODEC_INSTALL_SYSTEM_PACKAGES="1")
    assert r.returncode == 1 and "went on" not in r.stdout
    assert "could not install stunnel4 redis-server" in r.stderr


def test_pip_output_shows_the_work_and_a_line_while_pip_is_silent(tmp_path) -> None:
    fake_pip = ('echo "Collecting pyspark>=4.0"; echo "  Using cached pyspark-4.3.0.tar.gz"; '
                'echo "WARNING: Location \'/x\' is ignored: it is neither a file nor a directory"; '
                'echo "Requirement already satisfied: numpy"; sleep 2.5; '
                'printf "Installing collected"; sleep 1.2; echo " packages: pyspark"; '
                'echo "Successfully installed pyspark-4.3.0"; exit 3')
    (tmp_path / "pip.sh").write_text(fake_pip)
    r = _bash(f"kcodec_pip_lines < <(bash {tmp_path / 'pip.sh'})", tmp_path,
              KCODEC_PIP_HEARTBEAT="1")
    lines = r.stdout.splitlines()
    assert lines[0] == "Collecting pyspark>=4.0"
    assert lines[-2:] == ["Installing collected packages: pyspark",
                          "Successfully installed pyspark-4.3.0"]
    beats = lines[1:-2]
    assert len(beats) >= 2 and all(
        b.startswith("kcodec: pip is still working (") and b.endswith("): Collecting pyspark>=4.0")
        for b in beats), lines
    assert "Using cached" not in r.stdout and "Location" not in r.stdout
    # a long line (pip's list of 40 packages) is cut short in the heartbeat
    (tmp_path / "long.sh").write_text('echo "Installing collected packages: ' +
                                      ", ".join(f"package{i}" for i in range(40)) +
                                      '"; sleep 1.5')
    r2 = _bash(f"kcodec_pip_lines < <(bash {tmp_path / 'long.sh'})", tmp_path,
               KCODEC_PIP_HEARTBEAT="1")
    beat = r2.stdout.splitlines()[1]
    assert beat.startswith("kcodec: pip is still working (1 s): Installing collected packages: ")
    assert beat.endswith("...") and len(beat) < 140
    assert "Requirement already satisfied" not in r.stdout
    # pip's exit status passes through the filter
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text(
        f"#!/usr/bin/env bash\nbash {tmp_path / 'pip.sh'}\n")
    (tmp_path / "venv" / "bin" / "python").chmod(0o755)
    r = _bash(f"VPY={tmp_path / 'venv/bin/python'}; kcodec_pip install x || echo rc=$?",
              tmp_path, KCODEC_PIP_HEARTBEAT="5")
    assert r.stdout.strip() == "rc=3" and "Successfully installed" in r.stderr


def _cache_cc(tmp_path: Path, *, ccache: bool, **env: str) -> subprocess.CompletedProcess:
    """kcodec_compiler_cache with PATH holding only a fake ccache (or none) and tr."""
    bin_ = tmp_path / "only"
    bin_.mkdir(exist_ok=True)
    (bin_ / "tr").unlink(missing_ok=True)
    (bin_ / "tr").symlink_to(shutil.which("tr"))
    fake = bin_ / "ccache"
    fake.unlink(missing_ok=True)
    if ccache:
        fake.write_text("#!/bin/sh\nexec \"$@\"\n")
        fake.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k not in ("CC", "KCODEC_CCACHE")}
    base["PATH"] = str(bin_)
    base.update(env)
    vpy = os.path.realpath(sys.executable)
    return subprocess.run(
        [shutil.which("bash"), "-c", f'set -euo pipefail; . scripts/_setup.sh; VPY="{vpy}"; '
                                     'kcodec_compiler_cache; echo "CC=${CC:-}"'],
        cwd=REPO, env=base, capture_output=True, text=True, timeout=60)


def test_builds_go_through_ccache_where_it_is_installed(tmp_path) -> None:
    import sysconfig

    cc = sysconfig.get_config_var("CC")
    r = _cache_cc(tmp_path, ccache=True)
    assert r.returncode == 0, r.stderr
    assert f"CC=ccache {cc}" in r.stdout.splitlines()            # the interpreter's command kept
    assert "compiling through ccache" in r.stderr and "KCODEC_CCACHE=0" in r.stderr
    assert _cache_cc(tmp_path, ccache=True, KCODEC_CCACHE="0").stdout.strip() == "CC="
    assert _cache_cc(tmp_path, ccache=True, CC="clang").stdout.strip() == "CC=clang"   # kept
    r = _cache_cc(tmp_path, ccache=False)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "CC=", "")
