"""Classic group membership across a kill -9 of ``kcodec broker --data-dir``: the coordinator
kept the group's metadata (generation, leader, members, assignments) in the offsets log, so
after the restart the members go on heartbeating at their generation, keep their partitions
and nobody is assigned a partition another member still owns."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from kcodec.broker.coordinator.offsets import FILE_NAME
from tests.runtime.support import Broker, produce

pytestmark = [pytest.mark.peers]


def _group_records(data_dir: str, group: str) -> list[dict]:
    """The group-metadata records of ``group`` in the broker's offsets log, oldest first."""
    out = []
    with open(os.path.join(data_dir, FILE_NAME), encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("g") == group and "gm" in rec:
                out.append(rec["gm"])
    return out


def test_kafka_python_members_keep_their_generation_and_partitions_across_a_restart() -> None:
    import kafka

    b = Broker(partitions=2)
    lock = threading.Lock()
    owner: dict[int, str] = {}          # partition -> the member that owns it now
    events: list[tuple[float, str, str, tuple[int, ...]]] = []
    double: list[tuple[int, str, str]] = []
    received: dict[str, set[bytes]] = {"a": set(), "b": set()}
    refused: list[tuple[str, str]] = []      # connection errors poll raised meanwhile
    stop = threading.Event()

    class Listener(kafka.ConsumerRebalanceListener):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_partitions_revoked(self, revoked):
            with lock:
                events.append((time.monotonic(), self.name, "revoke",
                               tuple(sorted(tp.partition for tp in revoked))))
                for tp in revoked:
                    if owner.get(tp.partition) == self.name:
                        del owner[tp.partition]

        def on_partitions_assigned(self, assigned):
            with lock:
                events.append((time.monotonic(), self.name, "assign",
                               tuple(sorted(tp.partition for tp in assigned))))
                for tp in assigned:
                    other = owner.get(tp.partition)
                    if other is not None and other != self.name:
                        double.append((tp.partition, other, self.name))
                    owner[tp.partition] = self.name

    def member(name: str) -> None:
        c = kafka.KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g-restart",
                                client_id=f"member-{name}", auto_offset_reset="earliest",
                                session_timeout_ms=10_000, heartbeat_interval_ms=500,
                                reconnect_backoff_max_ms=500, retry_backoff_ms=100,
                                partition_assignment_strategy=[
                                    kafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor])
        c.subscribe(["t"], listener=Listener(name))
        try:
            while not stop.is_set():
                try:
                    got = c.poll(200)
                except kafka.errors.KafkaConnectionError as exc:
                    # kafka-python's poll raises when it looks the coordinator up while
                    # the broker is down (refused): a user's loop polls on, as this one
                    with lock:
                        refused.append((name, str(exc)))
                    time.sleep(0.1)
                    continue
                for recs in got.values():
                    with lock:
                        received[name].update(r.value for r in recs)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(n,), daemon=True) for n in "ab"]
    try:
        produce(b.bootstrap, "t", 10, partitions=2)
        threads[0].start()
        time.sleep(1.0)
        threads[1].start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if sorted(owner.values()) == ["a", "b"] and len(received["a"] | received["b"]) == 10:
                    break
            time.sleep(0.1)
        with lock:
            assert sorted(owner.values()) == ["a", "b"], (owner, events)
            before = dict(owner)
        time.sleep(1.0)             # the last SyncGroup is answered, so in the log
        kept = _group_records(b.dir, "g-restart")
        t_kill = time.monotonic()

        b.kill()
        time.sleep(0.3)
        b.start()
        produce(b.bootstrap, "t", 10, start=10, partitions=2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(received["a"] | received["b"]) == 20:
                    break
            time.sleep(0.1)
        time.sleep(3.0)             # several heartbeats against the new broker
        with lock:
            assert len(received["a"] | received["b"]) == 20, (received, refused)
            assert owner == before
            assert [e for e in events if e[0] > t_kill] == []      # no rebalance at all
        # the generation did not change: no newer record than the one before the kill
        assert kept and len(kept[-1]["members"]) == 2
        assert _group_records(b.dir, "g-restart")[-1] == kept[-1]
    finally:
        stop.set()
        for t in threads:
            if t.is_alive():
                t.join(20)
        b.close()
    assert double == []
