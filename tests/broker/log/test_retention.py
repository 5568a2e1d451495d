"""Time retention on a running Cluster: records whose timestamps are older than retention.ms
(Kafka's default is 7 days) are deleted by the next retention run, as Kafka does; topics
made with retention.ms=-1 keep them, and ``kcodec demo`` (whose records carry 2023
timestamps) makes its topics that way so a retention run mid-demo loses nothing."""

from __future__ import annotations

import json

from kcodec.broker import Cluster
from kcodec.broker.state import now_ms
from kcodec.cli import main
from kcodec.cli.demo import _records
from kcodec.client import Consumer, Producer, TopicPartition

OLD_TS = 1_700_000_000_000      # November 2023, the demo's base timestamp


def _produce_old(bootstrap: str, topic: str, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for k, v, hs, ts in _records(n, "none"):
            p.send(topic, v, key=k, headers=hs, timestamp=ts, partition=0)
        p.flush()


def _consume_all(bootstrap: str, topic: str, want: int) -> list:
    got: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(topic, 0)])
        for _ in range(6):
            for _tp, rs in c.poll(0.3).items():
                got += rs
            if len(got) >= want:
                break
    return got


def test_time_retention_deletes_old_timestamp_records() -> None:
    with Cluster(1) as cluster:
        cluster.create_topic("old", 1)
        _produce_old(cluster.bootstrap, "old", 300)
        assert len(_consume_all(cluster.bootstrap, "old", 300)) == 300
        log = cluster.state.partition("old", 0).log
        assert (log.log_start_offset, log.log_end_offset) == (0, 300)
        assert min(r.timestamp for r in _consume_all(cluster.bootstrap, "old", 300)) == OLD_TS

        assert cluster.state.logs.run_retention(now_ms()) >= 1     # the default 7 days
        assert log.log_start_offset == log.log_end_offset == 300
        assert _consume_all(cluster.bootstrap, "old", 1) == []


def test_retention_ms_minus_one_keeps_old_timestamp_records() -> None:
    with Cluster(1) as cluster:
        cluster.create_topic("kept", 1, configs={"retention.ms": "-1"})
        _produce_old(cluster.bootstrap, "kept", 300)
        assert cluster.state.logs.run_retention(now_ms()) == 0
        log = cluster.state.partition("kept", 0).log
        assert (log.log_start_offset, log.log_end_offset) == (0, 300)
        assert len(_consume_all(cluster.bootstrap, "kept", 300)) == 300


def test_demo_survives_retention_runs_during_the_demo(capsys) -> None:
    # A retention run every 20 ms: with default-retention topics the demo's 2023 records
    # would be deleted between produce and consume.
    with Cluster(1, num_partitions=4, retention_check_s=0.02) as cluster:
        rc = main(["demo", "-b", cluster.bootstrap, "-n", "3000", "-c", "lz4", "-c", "none",
                   "--json"])
        out, err = capsys.readouterr()
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert rc == 0, out + err
        assert [(r["codec"], r["ok"], r["received"]) for r in rows] == \
            [("lz4", True, 3000), ("none", True, 3000)]
