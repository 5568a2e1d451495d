"""What the transaction tests share, whatever broker they run against (kcodec's, noida-db):
read a topic with kcodec's or confluent-kafka's consumer at an isolation level, and a
consume-transform-produce loop whose producer and consumer are killed at random points."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from kcodec.client import Consumer, Producer

FAST = dict(api_timeout_ms=20000, request_timeout_ms=10000)


def kcodec_read(bootstrap: str, topic: str, isolation: str, n: int, partitions: int = 1,
                timeout: float = 15, poll_s: float = 0.3) -> list[bytes]:
    """Values read from the start of ``topic`` by kcodec's consumer: at least ``n`` of them
    if they come within ``timeout``, then whatever follows until two empty polls."""
    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                 isolation_level=isolation, **FAST)
    try:
        c.assign([(topic, p) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and (len(got) < n or quiet < 2):
            polled = c.poll(poll_s)
            quiet = 0 if polled else quiet + 1
            for tp in sorted(polled):
                got += [r.value for r in polled[tp]]
        return got
    finally:
        c.close()


def confluent_read(bootstrap: str, topic: str, n: int, partitions: int = 1,
                   isolation: str = "read_committed", timeout: float = 15,
                   poll_s: float = 0.3) -> list[bytes]:
    """The same with confluent-kafka's consumer (librdkafka), four empty polls at the end."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cc = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                   "auto.offset.reset": "earliest",
                                   "isolation.level": isolation})
    try:
        cc.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and (len(got) < n or quiet < 4):
            m = cc.poll(poll_s)
            if m is None:
                quiet += 1
                continue
            quiet = 0
            if not m.error():
                got.append(m.value())
        return got
    finally:
        cc.close()


def consume_transform_produce(bootstrap: str, src: str, dst: str, *, seed: int,
                              kill_mid_send: float, kill_before_commit: float,
                              max_poll_records: int, poll_s: float = 0.3, idle_polls: int = 3,
                              budget_s: float = 60) -> tuple[bool, int]:
    """Copy ``src`` partition 0 into ``dst`` as ``b"x" + value``, one transaction per poll
    (records and consumed offsets together), in rounds: each round's producer and consumer
    are dropped without commit or close at a random point (mid-send, or after a flush and
    before the commit); the next round's producer, same transactional id, fences the dead
    one's transaction. Returns (finished, kills)."""
    rng = random.Random(seed)
    group, tid = f"g-{src}", f"ctp-{src}"
    kills = 0
    deadline = time.monotonic() + budget_s
    done = False
    while not done and time.monotonic() < deadline:
        c = Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                     enable_auto_commit=False, isolation_level="read_committed",
                     max_poll_records=max_poll_records, **FAST)
        p = Producer(bootstrap_servers=bootstrap, transactional_id=tid, **FAST)
        killed = False
        try:
            p.init_transactions()
            c.assign([(src, 0)])
            idle = 0
            while not killed:
                polled = c.poll(poll_s)
                if not polled:
                    idle += 1
                    if idle >= idle_polls:
                        done = True
                        break
                    continue
                idle = 0
                p.begin_transaction()
                offsets = {}
                for tp, recs in polled.items():
                    for r in recs:
                        p.send(dst, b"x" + r.value, partition=0)
                        if rng.random() < kill_mid_send:
                            killed = True        # dies after sending part of the batch
                            break
                    offsets[tp] = recs[-1].offset + 1
                    if killed:
                        break
                if killed:
                    break
                if rng.random() < kill_before_commit:
                    p.flush()
                    killed = True                # dies before committing
                    break
                p.send_offsets_to_transaction(offsets, group)
                p.commit_transaction()
        finally:
            if killed:
                kills += 1
                p.close(0)                       # no commit, no abort: a dead process
            else:
                p.close()
            c.close()
    return done, kills
