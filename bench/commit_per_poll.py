"""A consumer that commits after every poll: records/s and commit latency, with the group
coordinator on a connection of its own (now) and on the data connection (before).

    python -m bench.commit_per_poll [RECORDS] [ROUNDS]

Workload: RECORDS (default 20,000) records of 100 bytes in one partition of kcodec's
broker (its own process, memory storage); a blocking ``Consumer`` (group, no auto-commit,
``max_poll_records=100``, ``fetch_max_wait_ms=500`` as by default) polls and calls
``commit()`` after every non-empty poll, until it has read them all. Each round runs both
variants, interleaved; the "shared" variant sends the group's requests to the broker's
data connection, as the client did before it had a coordinator connection. Prints
records/s and the mean commit time of each variant per round, and the ratio.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid

from kcodec.client import Consumer, Producer, TopicPartition
from kcodec.client.consumer import classic_group


def _broker() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--json"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["bootstrap"]


def _fill(bootstrap: str, topic: str, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=20) as p:
        for i in range(n):
            p.send(topic, b"%099d" % i, partition=0)


def _consume(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    tp = TopicPartition(topic, 0)
    commits = []
    with Consumer(bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                  enable_auto_commit=False, auto_offset_reset="earliest",
                  max_poll_records=100) as c:
        c.assign([tp])
        got = 0
        t0 = time.perf_counter()
        while got < n:
            k = sum(len(v) for v in c.poll(1.0).values())
            if k:
                got += k
                t1 = time.perf_counter()
                c.commit()
                commits.append(time.perf_counter() - t1)
        took = time.perf_counter() - t0
    return n / took, statistics.mean(commits)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    own = classic_group.coordinator_channel

    proc, bootstrap = _broker()
    try:
        topic = f"commit-{uuid.uuid4().hex[:8]}"
        _fill(bootstrap, topic, n)
        rows = []
        for r in range(rounds):
            for variant in ("own", "shared"):
                classic_group.coordinator_channel = own if variant == "own" else (lambda x: x)
                try:
                    rate, commit = _consume(bootstrap, topic, n)
                finally:
                    classic_group.coordinator_channel = own
                rows.append((r, variant, rate, commit))
                print(f"round {r} {variant:6s} {rate:9.0f} records/s   commit mean "
                      f"{commit * 1000:8.2f} ms", flush=True)
        for variant in ("own", "shared"):
            rates = [x[2] for x in rows if x[1] == variant]
            commits = [x[3] for x in rows if x[1] == variant]
            print(f"{variant:6s} median {statistics.median(rates):9.0f} records/s, commit mean "
                  f"{statistics.median(commits) * 1000:.2f} ms")
        ratio = statistics.median(x[2] for x in rows if x[1] == "own") / \
            statistics.median(x[2] for x in rows if x[1] == "shared")
        print(f"own coordinator connection / shared: {ratio:.1f}x records/s")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
