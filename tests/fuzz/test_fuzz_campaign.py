"""A short real fuzzing campaign (fuzz/campaign.sh: atheris + libFuzzer) over every target.

The long campaigns (a million executions per target, fuzz/README.md) use the same script;
this one checks that it still runs end to end: every target starts from the committed
corpus, executes under libFuzzer with the compiled and the pure twin on each input, finds
nothing, and is recorded in campaign.tsv. The committed corpus is only read (MERGE=0) and
everything written goes to a temporary directory.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.targets import TARGETS
from tests.support import REPO

ROOT = REPO
RUNS = 150


def _corpus_state() -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(ROOT)), p.stat().st_size)
                  for p in (ROOT / "fuzz" / "corpus").rglob("*") if p.is_file())


@pytest.mark.slow
def test_smoke_campaign(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="the campaign needs atheris (the test extra)")
    pytest.importorskip("pyspark", reason="the sparklog target needs pyspark")
    env = {**os.environ, "FUZZ_OUT": str(tmp_path), "MERGE": "0", "PYTHON": sys.executable,
           "ASAN_TREE": str(tmp_path / "no-asan-build"), "KCODEC_FUZZ_INSTRUMENT": "none",
           "MAX_SECS": "60"}
    before = _corpus_state()
    proc = subprocess.run(["bash", str(ROOT / "fuzz" / "campaign.sh"), "--runs", str(RUNS)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(tmp_path / "logs" / "campaign.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert sorted(r["target"] for r in rows) == sorted(TARGETS)
    for r in rows:
        assert r["exit"] == "0", r
        assert r["build"] == "plain" and r["instrument"] == "none", r
        assert int(r["executions"]) >= RUNS, r
    assert not [p.name for p in (tmp_path / "artifacts").iterdir()]
    assert _corpus_state() == before   # the committed corpus was only read
