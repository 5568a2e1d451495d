"""The transactional producer end to end against noida-db, a broker whose read_committed
fetches hide aborted transactions: kcodec's and confluent-kafka's read_committed consumers
must agree on exactly the committed records, also when a consume-transform-produce loop is
killed at random points."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from kcodec.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.broker, pytest.mark.peers]
FAST = dict(api_timeout_ms=20000, request_timeout_ms=10000)


@pytest.fixture(scope="module")
def noida():
    from tests.noida import Noida, noida_binary

    if noida_binary() is None:
        pytest.skip("noida-db is not installed (the test extra installs it on x86-64 Linux)")
    with Noida() as n:
        yield n.bootstrap


def _kcodec_read(bootstrap: str, topic: str, isolation: str, n: int, partitions: int = 1,
                 timeout: float = 15) -> list[bytes]:
    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                 isolation_level=isolation, **FAST)
    try:
        c.assign([(topic, p) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and (len(got) < n or quiet < 2):
            polled = c.poll(0.5)
            quiet = 0 if polled else quiet + 1
            for recs in polled.values():
                got += [r.value for r in recs]
        return got
    finally:
        c.close()


def _confluent_read(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list[bytes]:
    import confluent_kafka

    cc = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                   "auto.offset.reset": "earliest",
                                   "isolation.level": "read_committed"})
    try:
        cc.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        quiet = 0
        while time.monotonic() < deadline and (len(got) < n or quiet < 4):
            m = cc.poll(0.5)
            if m is None:
                quiet += 1
                continue
            quiet = 0
            if not m.error():
                got.append(m.value())
        return got
    finally:
        cc.close()


def test_read_committed_hides_aborted_transactions(noida):
    topic = f"rc-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=noida, **FAST) as admin:
        admin.create_topics([topic], num_partitions=1)
    with Producer(bootstrap_servers=noida, transactional_id=f"rc-{topic}", **FAST) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"c{i}".encode(), partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"a{i}".encode(), partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"d0", partition=0)
        p.commit_transaction()
    committed = [b"c0", b"c1", b"c2", b"d0"]
    assert _kcodec_read(noida, topic, "read_committed", 4) == committed
    assert _confluent_read(noida, topic, 4) == committed
    assert _kcodec_read(noida, topic, "read_uncommitted", 7) == \
        [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"d0"]


def test_consume_transform_produce_killed_at_random_points(noida):
    """Each round consumes a little, produces the transformed records and the offsets in
    one transaction, and is killed (producer and consumer dropped without commit or
    close) at a random point. A restarted producer with the same transactional_id fences
    the dead one's transaction. At the end the read_committed output is exactly one
    transformed copy of every input record: no duplicate, nothing lost."""
    rng = random.Random(1234)
    src, dst = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    group, tid = f"g-{src}", f"ctp-{src}"
    n = 60
    with Admin(bootstrap_servers=noida, **FAST) as admin:
        admin.create_topics([src, dst], num_partitions=1)
    with Producer(bootstrap_servers=noida, **FAST) as p:
        for i in range(n):
            p.send(src, f"{i}".encode(), partition=0)
    kills = 0
    deadline = time.monotonic() + 90
    done = False
    while not done and time.monotonic() < deadline:
        c = Consumer(bootstrap_servers=noida, group_id=group, auto_offset_reset="earliest",
                     enable_auto_commit=False, isolation_level="read_committed",
                     max_poll_records=7, **FAST)
        p = Producer(bootstrap_servers=noida, transactional_id=tid, **FAST)
        killed = False
        try:
            p.init_transactions()
            c.assign([(src, 0)])
            idle = 0
            while not killed:
                polled = c.poll(0.5)
                if not polled:
                    idle += 1
                    if idle >= 4:
                        done = True
                        break
                    continue
                idle = 0
                p.begin_transaction()
                offsets = {}
                for tp, recs in polled.items():
                    for r in recs:
                        p.send(dst, b"x" + r.value, partition=0)
                        if rng.random() < 0.04:
                            killed = True       # dies after sending part of the batch
                            break
                    offsets[tp] = recs[-1].offset + 1
                    if killed:
                        break
                if killed:
                    break
                if rng.random() < 0.15:
                    p.flush()
                    killed = True               # dies before committing
                    break
                p.send_offsets_to_transaction(offsets, group)
                p.commit_transaction()
        finally:
            if killed:
                kills += 1
                p.close(0)                      # no commit, no abort: a dead process
            else:
                p.close()
            c.close()
    assert done and kills >= 2
    expected = [b"x" + f"{i}".encode() for i in range(n)]
    assert _kcodec_read(noida, dst, "read_committed", n) == expected
    assert _confluent_read(noida, dst, n) == expected
