"""``kcodec broker`` started on a data directory whose log is damaged says which partition
was cut and where, on stderr (``DATA LOST:`` first when flushed records went) and in the
``--json`` start line's ``truncated`` list."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from kcodec.broker import Cluster
from kcodec.client import Producer
from kcodec.testing.net import free_port
from tests.support import REPO


def _damaged_dir(root: Path) -> Path:
    """A data dir with topic ``t`` (records 0-39, a batch each), stopped cleanly
    (flushed), then the batch-length field of its second batch made absurd."""
    data = root / "data"
    with Cluster(data_dir=data, num_partitions=1) as c:
        with Producer(bootstrap_servers=c.bootstrap, linger_ms=0) as p:
            for i in range(40):
                p.send("t", b"v%d" % i).result(10)
    (first,) = sorted(data.glob("**/t-0/00000000000000000000.log"))
    raw = bytearray(first.read_bytes())
    second = 12 + int.from_bytes(raw[8:12], "big")      # the first batch's end
    raw[second + 8:second + 12] = (0x7FFFFFF0).to_bytes(4, "big")
    first.write_bytes(bytes(raw))
    return data


def _start(data: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--data-dir", str(data),
                             "--port", str(free_port()), *extra], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    return err


def test_a_damaged_log_is_reported_on_stderr_and_in_the_json_line(tmp_path) -> None:
    data = _damaged_dir(tmp_path)
    again = tmp_path / "again"
    shutil.copytree(data, again)           # the report comes once: the first start cuts

    proc = _start(data, "--json")
    try:
        assert proc.stdout is not None
        line = json.loads(proc.stdout.readline())
    finally:
        _stop(proc)
    (cut,) = line["truncated"]
    assert (cut["topic"], cut["partition"], cut["offset"]) == ("t", 0, 1)
    assert cut["below_recovery_point"] is True and cut["bytes"] > 0

    proc = _start(again)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()             # the bootstrap: started, the report written
    finally:
        err = _stop(proc)
    lost = [ln for ln in err.splitlines() if "DATA LOST:" in ln]
    assert len(lost) == 1 and "t-0" in lost[0] and "truncated to offset 1" in lost[0], err
