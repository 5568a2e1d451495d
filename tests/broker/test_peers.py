"""Independent clients against the kcodec broker: confluent-kafka (librdkafka), kafka-python
and aiokafka produce and consume with every codec, consumer groups (one library and mixed),
commits, idempotent produce under injected faults, LogAppendTime, timestamp lookup,
DeleteRecords, leader moves and node restarts."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kcodec.broker import LOSE_ANSWER, Cluster
from kcodec.protocol import ErrorCode

pytestmark = pytest.mark.peers

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 300


@pytest.fixture
def kb():
    with Cluster(1, num_partitions=3) as c:
        yield c


def expected(n=N):
    return [b"v%05d" % i for i in range(n)]


def ck_produce(bs, topic, n=N, codec="none", **conf):
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 5, **conf})
    errors = []
    for i in range(n):
        p.produce(topic, b"v%05d" % i, key=b"k%d" % (i % 7),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors
    return p


def ck_consume(bs, topic, n=N, group="g-ck", timeout=30):
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m)
    c.commit(asynchronous=False)
    c.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_every_codec(kb, codec):
    ck_produce(kb.bootstrap, "t", codec=codec)
    got = ck_consume(kb.bootstrap, "t")
    assert sorted(m.value() for m in got) == expected()
    # per partition, offsets come back in order with no gaps
    by_part = {}
    for m in got:
        by_part.setdefault(m.partition(), []).append(m.offset())
    assert all(offs == list(range(len(offs))) for offs in by_part.values())


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_every_codec(kb, codec):
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=kb.bootstrap,
                            compression_type=None if codec == "none" else codec, linger_ms=5)
    for i in range(N):
        p.send("t", b"v%05d" % i, key=b"k%d" % (i % 7))
    p.flush(30)
    p.close()
    c = kafka.KafkaConsumer("t", bootstrap_servers=kb.bootstrap, group_id="g-kp",
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            consumer_timeout_ms=500)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=300).values():
            got += [r.value for r in recs]
    c.commit()
    committed = sum(c.committed(kafka.TopicPartition("t", i)) or 0 for i in range(3))
    c.close()
    assert sorted(got) == expected()
    assert committed == N


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_every_codec(kb, codec):
    import aiokafka

    async def go():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=kb.bootstrap,
                                      compression_type=None if codec == "none" else codec,
                                      enable_idempotence=True)
        await p.start()
        try:
            for i in range(N):
                await p.send("t", b"v%05d" % i, key=b"k%d" % (i % 7))
            await p.flush()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer("t", bootstrap_servers=kb.bootstrap, group_id="g-aio",
                                      auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=300)).values():
                    got += [r.value for r in recs]
            await c.commit()
        finally:
            await c.stop()
        return got
    assert sorted(asyncio.run(go())) == expected()


def test_mixed_consumer_group_rebalances_and_commits(kb):
    """confluent-kafka, kafka-python and kcodec consumers in ONE group: the partitions are
    shared, every record is read exactly once across members and rebalances (a member
    leaving hands its partitions over), and the commits add up."""
    import confluent_kafka as ck
    import kafka
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    from kcodec.client import Consumer

    kb.create_topic("mixed", 6)
    seen: dict[str, list[bytes]] = {"ck": [], "kp": [], "kc": []}
    stops = {k: threading.Event() for k in seen}
    owns = dict.fromkeys(seen, 0)     # partitions each member holds, as it last saw
    errors = []

    def run_ck():
        c = ck.Consumer({"bootstrap.servers": kb.bootstrap, "group.id": "mix",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "partition.assignment.strategy": "range", "session.timeout.ms": 10000})
        c.subscribe(["mixed"])
        try:
            while not stops["ck"].is_set():
                m = c.poll(0.1)
                owns["ck"] = len(c.assignment())
                if m is not None and not m.error():
                    seen["ck"].append(m.value())
                    c.commit(m, asynchronous=False)
        except Exception as exc:   # surfaced below
            errors.append(exc)
        finally:
            owns["ck"] = 0
            c.close()

    def run_kp():
        c = kafka.KafkaConsumer("mixed", bootstrap_servers=kb.bootstrap, group_id="mix",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                partition_assignment_strategy=[RangePartitionAssignor],
                                session_timeout_ms=10000, heartbeat_interval_ms=500)
        try:
            while not stops["kp"].is_set():
                recs = c.poll(timeout_ms=100)
                owns["kp"] = len(c.assignment())
                for batch in recs.values():
                    seen["kp"] += [r.value for r in batch]
                if recs:
                    c.commit()
        except Exception as exc:
            errors.append(exc)
        finally:
            owns["kp"] = 0
            c.close()

    def run_kc():
        c = Consumer(bootstrap_servers=kb.bootstrap, group_id="mix", auto_offset_reset="earliest",
                     enable_auto_commit=False, partition_assignment_strategy="range",
                     session_timeout_ms=10000, heartbeat_interval_ms=500,
                     group_protocol="classic")      # a classic group with other clients
        c.subscribe(["mixed"])
        try:
            while not stops["kc"].is_set():
                recs = c.poll(0.1)
                owns["kc"] = len(c.assignment())
                for rs in recs.values():
                    seen["kc"] += [r.value for r in rs]
                if recs:
                    c.commit()
        except Exception as exc:
            errors.append(exc)
        finally:
            owns["kc"] = 0
            c.close()

    def wait_stable(members):
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and not errors:
            g = kb.groups.groups.get("mix")
            # stable, and each member holds partitions: a leader that assigned before it
            # had the topic's metadata (kafka-python warns "No partition metadata") gives
            # an empty assignment first and a real one a rebalance later
            if g is not None and g.state == "Stable" and len(g.members) == members \
                    and sum(1 for n in owns.values() if n) == members:
                return
            time.sleep(0.1)
        raise AssertionError(f"group not stable with {members} members: {g}; "
                             f"partitions held: {owns}")

    def wait_total(n):
        deadline = time.monotonic() + 45
        while sum(len(v) for v in seen.values()) < n and time.monotonic() < deadline and not errors:
            time.sleep(0.1)

    threads = {k: threading.Thread(target=f) for k, f in
               (("ck", run_ck), ("kp", run_kp), ("kc", run_kc))}
    for t in threads.values():
        t.start()
    try:
        wait_stable(3)
        p = ck_produce(kb.bootstrap, "mixed", n=600)
        wait_total(600)
        assert all(seen[k] for k in seen), (
            f"the partitions were not shared by all three: held {owns}, "
            f"read { {k: len(v) for k, v in seen.items()} }")
        stops["kc"].set()                     # a member leaves: another rebalance
        threads["kc"].join(30)
        wait_stable(2)
        for i in range(600, 900):
            p.produce("mixed", b"v%05d" % i)
        assert p.flush(30) == 0
        wait_total(900)
    finally:
        for k, t in threads.items():
            stops[k].set()
            t.join(30)
    assert not errors
    allv = seen["ck"] + seen["kp"] + seen["kc"]
    assert sorted(set(allv)) == expected(900)
    assert len(allv) == 900, "a record was read twice: commits or fencing were lost"
    committed = kb.offsets.committed("mix")
    assert sum(o for o, _e, _m in committed.values()) == 900


def test_idempotent_producer_with_lost_answers_has_no_duplicates(kb):
    """Every 4th Produce is written but its answer is lost (the connection drops), and some
    are refused with a retriable error: librdkafka retries, the broker recognises the
    duplicates, and the log has each record once, in order."""
    kb.create_topic("idem", 1)
    count = {"n": 0}

    def fault(req):
        count["n"] += 1
        if count["n"] % 4 == 0:
            return LOSE_ANSWER
        if count["n"] % 7 == 0:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None
    kb.hook("Produce", fault)
    ck_produce(kb.bootstrap, "idem", n=2000, codec="lz4", **{"enable.idempotence": True,
                                                             "linger.ms": 2, "batch.num.messages": 50})
    kb.clear_hooks()
    assert count["n"] >= 8
    got = ck_consume(kb.bootstrap, "idem", n=2000)
    assert [m.value() for m in got] == expected(2000)


def test_log_append_time_timestamp_lookup_and_delete_records(kb):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    kb.create_topic("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
    t0 = int(time.time() * 1000)
    ck_produce(kb.bootstrap, "lat", n=100)
    msgs = ck_consume(kb.bootstrap, "lat", n=100, group="g-lat")
    kinds = {m.timestamp()[0] for m in msgs}
    assert kinds == {ck.TIMESTAMP_LOG_APPEND_TIME}
    assert all(t0 <= m.timestamp()[1] <= int(time.time() * 1000) for m in msgs)

    kb.create_topic("ts", 1)
    p = ck.Producer({"bootstrap.servers": kb.bootstrap})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        p.produce("ts", b"%d" % i, timestamp=base + i * 1000)
    p.flush(10)
    c = ck.Consumer({"bootstrap.servers": kb.bootstrap, "group.id": "g-ts"})
    (found,) = c.offsets_for_times([ck.TopicPartition("ts", 0, base + 4500)], timeout=10)
    assert found.offset == 5
    lo, hi = c.get_watermark_offsets(ck.TopicPartition("ts", 0), timeout=10)
    assert (lo, hi) == (0, 10)
    admin = AdminClient({"bootstrap.servers": kb.bootstrap})
    fut = admin.delete_records([ck.TopicPartition("ts", 0, 6)])
    for f in fut.values():
        f.result(10)
    lo, hi = c.get_watermark_offsets(ck.TopicPartition("ts", 0), timeout=10, cached=False)
    assert (lo, hi) == (6, 10)
    c.close()


def test_leader_move_and_node_restart_under_confluent_kafka():
    import confluent_kafka as ck

    with Cluster(3) as c:
        c.create_topic("moving", 2, leaders=[0, 1])
        p = ck.Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True,
                         "topic.metadata.refresh.interval.ms": 500, "retry.backoff.ms": 50})
        errors = []

        def send(lo, hi):
            for i in range(lo, hi):
                p.produce("moving", b"v%05d" % i, partition=i % 2,
                          on_delivery=lambda e, m: errors.append(e) if e else None)
                p.poll(0)
        send(0, 100)
        assert p.flush(20) == 0
        c.move_leader("moving", 0, 2)          # leader moves: the old leader says NOT_LEADER
        send(100, 200)
        assert p.flush(30) == 0
        c.stop_node(1)                         # partition 1's leader goes away ...
        send(200, 300)
        time.sleep(1.0)
        c.restart_node(1)                      # ... and comes back with its log
        assert p.flush(30) == 0
        assert not errors
        got = ck_consume(c.bootstrap, "moving", n=300, group="g-move")
        assert sorted(m.value() for m in got) == expected(300)
        assert c.leader_of("moving", 0) == 2


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_idempotent_python_peers_with_lost_answers(kb, client):
    """The same faults for kafka-python's and aiokafka's idempotent producers."""
    kb.create_topic("idem2", 1)
    count = {"n": 0}

    def fault(req):
        count["n"] += 1
        return LOSE_ANSWER if count["n"] % 3 == 0 else None
    kb.hook("Produce", fault)
    n = 300
    if client == "kafka-python":
        import kafka

        p = kafka.KafkaProducer(bootstrap_servers=kb.bootstrap, enable_idempotence=True,
                                linger_ms=2, batch_size=2000, request_timeout_ms=3000,
                                retry_backoff_ms=50)
        futs = [p.send("idem2", b"v%05d" % i, partition=0) for i in range(n)]
        p.flush(60)
        for f in futs:
            f.get(30)
        p.close()
    else:
        import aiokafka

        async def go():
            p = aiokafka.AIOKafkaProducer(bootstrap_servers=kb.bootstrap, enable_idempotence=True,
                                          linger_ms=2, max_batch_size=2000,
                                          request_timeout_ms=3000, retry_backoff_ms=50)
            await p.start()
            try:
                futs = [await p.send("idem2", b"v%05d" % i, partition=0) for i in range(n)]
                for f in futs:
                    await f
            finally:
                await p.stop()
        asyncio.run(go())
    kb.clear_hooks()
    assert count["n"] >= 3
    log = kb.state.topics["idem2"].partitions[0].log
    from kcodec.records import iter_batches
    got = [r.value for b in iter_batches(log.read(0, 1 << 30)) for r in b]
    assert got == expected(n)
