"""``kcodec info``: the table, --json, and ``python -m kcodec info``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import kcodec
from kcodec.cli import main
from kcodec.crc import CRC32C_BACKEND


def test_table(capsys) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"kcodec          {kcodec.__version__}" in out
    assert "implementation  " + kcodec.IMPLEMENTATION in out
    assert f"crc32c backend  {CRC32C_BACKEND}" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("codec"))
    assert lines[header].split() == ["codec", "id", "library", "version", "default", "level", "available"]
    rows = [line.split()[:3] for line in lines[header + 1 :]]
    assert rows[0] == ["none", "0", "-"]
    assert rows[1] == ["gzip", "1", "zlib"]
    assert rows[2] == ["snappy", "2", "cramjam"]
    assert rows[3] == ["lz4", "3", "lz4"]
    assert rows[4][:2] == ["zstd", "4"]
    assert all(line.rstrip().endswith("yes") for line in lines[header + 1 :])


def test_json(capsys) -> None:
    assert main(["info", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    info = json.loads(out)
    assert info["version"] == kcodec.__version__
    assert info["implementation"] == kcodec.IMPLEMENTATION
    assert info["crc32c_backend"] == CRC32C_BACKEND
    assert [(c["name"], c["id"], c["default_level"]) for c in info["codecs"]] == [
        ("none", 0, None), ("gzip", 1, 6), ("snappy", 2, None), ("lz4", 3, 9), ("zstd", 4, 3)
    ]
    assert all(c["available"] and (c["version"] or c["name"] == "none") for c in info["codecs"])


def test_python_dash_m(tmp_path) -> None:
    # The kcodec this test imported (a source tree or an installed wheel), run from elsewhere.
    where = os.path.dirname(os.path.dirname(os.path.abspath(kcodec.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = where + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "kcodec", "info", "--json"], capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["implementation"] == kcodec.IMPLEMENTATION
    pure = subprocess.run(
        [sys.executable, "-m", "kcodec", "info"], capture_output=True, text=True,
        env={**env, "KCODEC_NO_EXTENSIONS": "1"}, cwd=tmp_path, timeout=60,
    )
    assert pure.returncode == 0, pure.stderr
    assert "implementation  python" in pure.stdout
