"""``kcodec transactions``: a process prepares a two-phase-commit transaction and dies; the
command lists and describes it, commits it from the recorded state (or aborts it), and the
read_committed reader sees what was committed."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin
from tests.cli.harness import ROOT, run
from tests.support.txn_util import FAST, kcodec_read

pytestmark = [pytest.mark.broker]

_CHILD = """
import os, sys
from kcodec.client import Producer
p = Producer(bootstrap_servers=sys.argv[1], transactional_id=sys.argv[2],
             transaction_two_phase_commit_enable=True, api_timeout_ms=20000)
p.init_transactions()
p.begin_transaction()
for i in range(3):
    p.send(sys.argv[3], b"v%d" % i, partition=0)
print(p.prepare_transaction(), flush=True)
os._exit(0)          # dies holding the prepared transaction
"""


@pytest.fixture(scope="module")
def two_pc():
    with Cluster(transaction_two_phase_commit_enable=True) as c:
        yield c


def _prepared_elsewhere(bootstrap: str) -> tuple[str, str, str]:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap, **FAST) as admin:
        admin.create_topics([topic], num_partitions=1)
    tid = f"app-{topic}"
    out = subprocess.run([sys.executable, "-c", _CHILD, bootstrap, tid, topic], cwd=ROOT,
                         capture_output=True, timeout=60, check=True).stdout.decode()
    return topic, tid, out.strip()


def test_list_describe_commit(two_pc):
    topic, tid, state = _prepared_elsewhere(two_pc.bootstrap)
    b = ["-b", two_pc.bootstrap]
    rc, out, err, _ = run("transactions", "list", "--state", "Ongoing", "--json", *b)
    assert rc == 0, err
    rows = {r["transactional_id"]: r for r in map(json.loads, out.splitlines())}
    assert rows[tid]["state"] == "Ongoing"
    assert str(rows[tid]["producer_id"]) == state.split(":")[0]
    rc, out, err, _ = run("transactions", "describe", tid, *b)
    assert rc == 0, err
    assert "two-phase" in out and f"{topic}-0" in out and "Ongoing" in out
    wrong = state.split(":")[0] + ":" + str(int(state.split(":")[1]) + 5)
    rc, out, err, _ = run("transactions", "commit", tid, "--prepared", "junk", *b)
    assert rc == 2 and "producer id" in err
    rc, out, err, _ = run("transactions", "commit", tid, "--prepared", state, *b)
    assert rc == 0 and "committed" in out, err
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 3) == [b"v0", b"v1", b"v2"]
    rc, out, err, _ = run("transactions", "commit", tid, "--prepared", wrong, *b)
    assert rc == 1 and "not committed" in out


def test_abort_and_a_state_that_does_not_match(two_pc):
    b = ["-b", two_pc.bootstrap]
    topic, tid, state = _prepared_elsewhere(two_pc.bootstrap)
    rc, out, err, _ = run("transactions", "abort", tid, *b)
    assert rc == 0 and "aborted" in out, err
    rc, out, err, _ = run("transactions", "commit", tid, "--prepared", state, *b)
    assert rc == 1                        # aborted: nothing is left to commit
    topic, tid, state = _prepared_elsewhere(two_pc.bootstrap)
    pid, epoch = state.split(":")
    rc, out, err, _ = run("transactions", "commit", tid, "--prepared", f"{pid}:{int(epoch) + 1}",
                          *b)
    assert rc == 1 and "aborted" in out
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 0, timeout=1) == []
    rc, out, err, _ = run("transactions", *b[:0])
    assert rc == 2 and "kcodec transactions list" in err
