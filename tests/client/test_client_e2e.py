"""End to end through the real broker, against confluent-kafka (librdkafka) as the peer."""

from __future__ import annotations

import random
import threading
import time

import pytest

from kcodec.client import Admin, Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.broker,  # kafka-python 3: deprecated importlib.resources call
              pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")]
confluent_kafka = pytest.importorskip("confluent_kafka")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FAST = dict(fetch_max_wait_ms=50, session_timeout_ms=2000, heartbeat_interval_ms=200)


def _records(n: int, seed: int) -> list[tuple]:
    """(key, value, headers, timestamp): None keys and values, binary, headers with None."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"k%d-" % i + rng.randbytes(rng.randint(0, 8))
        value = None if i % 11 == 0 else rng.randbytes(rng.randint(0, 200))
        headers = [] if i % 3 else [("h1", b"x%d" % i), ("h2", None), ("bin", rng.randbytes(4))]
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def _create(broker, topic: str, partitions: int = 4) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        assert a.create_topics([topic], num_partitions=partitions)[topic] is None


def _cf_consume(bootstrap: str, topic: str, n: int, timeout: float = 60) -> list:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"cf-{topic}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 50})
    c.assign([confluent_kafka.TopicPartition(topic, i, confluent_kafka.OFFSET_BEGINNING)
              for i in range(4)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(min(10000, n - len(got)), 0.5):
            assert m.error() is None, m.error()
            got.append(m)
    c.close()
    return got


def _produce_kcodec_check_confluent(broker, topic, codec, n) -> None:
    _create(broker, topic)
    recs = _records(n, hash(codec) & 0xFFFF)
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5) as p:
        futs = [p.send(topic, v, key=k, headers=h, timestamp=ts) for k, v, h, ts in recs]
        p.flush()
        results = [f.result(30) for f in futs]
    # -1: a batch retried after its answer was lost (a loaded machine) was answered
    # DUPLICATE_SEQUENCE_NUMBER: written once, at an offset the broker does not say
    assert all(r.offset >= 0 or r.offset == -1 for r in results)
    got = _cf_consume(broker.bootstrap, topic, n)
    assert len(got) == n                        # every record exactly once
    by = {(m.partition(), m.offset()): m for m in got}
    by_ts = {(m.partition(), m.timestamp()[1]): m for m in got}   # timestamps are unique
    for (k, v, h, ts), r in zip(recs, results, strict=False):
        m = by[(r.partition, r.offset)] if r.offset >= 0 else by_ts[(r.partition, ts)]
        assert m.key() == k and m.value() == v
        assert (m.headers() or []) == [tuple(x) for x in h]
        assert m.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, ts)
        if k is not None:   # same partition as librdkafka's murmur2_random would choose
            from kcodec.client.producer.partitioner import partition_for_key
            assert r.partition == partition_for_key(k, 4)


def _produce_confluent_check_kcodec(broker, topic, codec, n) -> None:
    _create(broker, topic)
    recs = _records(n, 99 + (hash(codec) & 0xFFF))
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                                  "linger.ms": 5, "partitioner": "murmur2_random"})
    sent = {}

    def cb(err, msg, i) -> None:
        assert err is None
        sent[(msg.partition(), msg.offset())] = recs[i]

    for i, (k, v, h, ts) in enumerate(recs):
        p.produce(topic, v, k, headers=h, timestamp=ts,
                  on_delivery=lambda err, msg, i=i: cb(err, msg, i))
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert len(sent) == n
    got = {}
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([TopicPartition(topic, i) for i in range(4)])
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for tp, rs in c.poll(0.5).items():
                for r in rs:
                    assert (tp.partition, r.offset) not in got
                    got[(tp.partition, r.offset)] = r
    assert len(got) == n
    for key, (k, v, h, ts) in sent.items():
        r = got[key]
        assert (r.key, r.value, r.timestamp) == (k, v, ts)
        assert [(hk, hv) for hk, hv in r.headers] == h


@pytest.mark.parametrize("codec", CODECS)
def test_kcodec_producer_to_confluent_consumer(broker, topic_name, codec) -> None:
    _produce_kcodec_check_confluent(broker, topic_name, codec, 2000)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_producer_to_kcodec_consumer(broker, topic_name, codec) -> None:
    _produce_confluent_check_kcodec(broker, topic_name, codec, 2000)


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
def test_100k_records_both_directions(broker, topic_name, codec) -> None:
    """5 codecs x (10k one way + 10k the other) = 100k records, nothing lost or changed."""
    _produce_kcodec_check_confluent(broker, topic_name + "-a", codec, 10000)
    _produce_confluent_check_kcodec(broker, topic_name + "-b", codec, 10000)


# ------------------------------------------------------------------------------ groups

def _poll_until(consumers, cond, timeout=30.0) -> None:
    deadline = time.monotonic() + timeout
    errors = []

    def loop(c) -> None:
        try:
            while time.monotonic() < deadline and not cond():
                c.poll(0.1)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert cond(), [sorted(c.assignment()) for c in consumers]


def _all(topic: str) -> set:
    return {TopicPartition(topic, i) for i in range(4)}


@pytest.mark.parametrize("strategy", ["range", pytest.param("roundrobin", marks=pytest.mark.slow),
                                      pytest.param("cooperative-sticky", marks=pytest.mark.slow)])
def test_two_consumers_split_then_take_over_on_leave(broker, topic_name, strategy) -> None:
    _create(broker, topic_name)
    cfg = dict(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
               auto_offset_reset="earliest", partition_assignment_strategy=strategy, **FAST)
    c1, c2 = Consumer(topic_name, **cfg), Consumer(topic_name, **cfg)
    try:
        _poll_until([c1, c2], lambda: (c1.assignment() | c2.assignment()) == _all(topic_name)
                    and len(c1.assignment()) == 2 and len(c2.assignment()) == 2)
        assert not (c1.assignment() & c2.assignment())
        c2.close()   # LeaveGroup: c1 takes over at once
        t0 = time.monotonic()
        _poll_until([c1], lambda: c1.assignment() == _all(topic_name), 15)
        assert time.monotonic() - t0 < 10
    finally:
        c1.close()
        c2.close()


@pytest.mark.slow
def test_takeover_when_a_consumer_is_killed(broker, topic_name) -> None:
    _create(broker, topic_name)
    cfg = dict(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
               auto_offset_reset="earliest", **FAST)
    c1, c2 = Consumer(topic_name, **cfg), Consumer(topic_name, **cfg)
    try:
        _poll_until([c1, c2], lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2)
        c2._loop.run(c2._engine.cluster.close(), 5)     # dies: no LeaveGroup, no heartbeats
        if c2._engine.group.hb_task:
            c2._engine.group.hb_task.cancel()
        _poll_until([c1], lambda: c1.assignment() == _all(topic_name), 20)
    finally:
        c1.close()


def test_mixed_group_with_confluent_range(broker, topic_name) -> None:
    _create(broker, topic_name)
    group = f"g-{topic_name}"
    k = Consumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                 partition_assignment_strategy="range", **FAST)
    cf = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                   "partition.assignment.strategy": "range",
                                   "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    cf.subscribe([topic_name])
    cf_parts: set = set()
    stop = threading.Event()

    def cf_loop() -> None:
        while not stop.is_set():
            cf.poll(0.1)
            cf_parts.clear()
            cf_parts.update(TopicPartition(tp.topic, tp.partition) for tp in cf.assignment())

    t = threading.Thread(target=cf_loop)
    t.start()
    try:
        _poll_until([k], lambda: len(k.assignment()) == 2 and len(cf_parts) == 2
                    and (k.assignment() | cf_parts) == _all(topic_name), 40)
        # range: each member holds two consecutive partitions
        assert sorted(p.partition for p in k.assignment()) in ([0, 1], [2, 3])
    finally:
        stop.set()
        t.join()
        cf.close()
        k.close()


def test_committed_offsets_survive_restart(broker, topic_name) -> None:
    _create(broker, topic_name)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(100):
            p.send(topic_name, b"v%d" % i, partition=i % 4)
    cfg = dict(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
               auto_offset_reset="earliest", enable_auto_commit=False, **FAST)
    seen = []
    with Consumer(topic_name, **cfg) as c:
        deadline = time.monotonic() + 30
        while len(seen) < 60 and time.monotonic() < deadline:
            for tp, rs in c.poll(0.2, max_records=60 - len(seen)).items():
                seen += [(tp.partition, r.offset) for r in rs]
        c.commit()
        committed = c.committed(_all(topic_name))
        assert sum(v or 0 for v in committed.values()) == 60
    rest = []
    with Consumer(topic_name, **cfg) as c:
        deadline = time.monotonic() + 30
        while len(rest) < 40 and time.monotonic() < deadline:
            for tp, rs in c.poll(0.2).items():
                rest += [(tp.partition, r.offset) for r in rs]
        assert c.committed([TopicPartition(topic_name, 0)])[TopicPartition(topic_name, 0)] == \
            committed[TopicPartition(topic_name, 0)]
    assert len(rest) == 40 and not set(rest) & set(seen)
    assert len(set(rest) | set(seen)) == 100


def test_seek_position_and_iteration(broker, topic_name) -> None:
    _create(broker, topic_name, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(10):
            p.send(topic_name, b"%d" % i)
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([tp])
        assert c.position(tp) == 0
        c.seek(tp, 7)
        it = iter(c)
        got = [next(it) for _ in range(3)]
        assert [(r.topic, r.partition, r.offset, r.value) for r in got] == \
            [(topic_name, 0, 7, b"7"), (topic_name, 0, 8, b"8"), (topic_name, 0, 9, b"9")]
        assert c.position(tp) == 10
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            # alone in its batch: Tansu's ListOffsets LATEST is right only then (tansu.md)
            assert p.send(topic_name, b"10").result(10).offset == 10
        c.seek_to_end()                 # no arguments: every assigned partition
        assert c.position(tp) == 11
        c.seek(tp, 9)
        c.pause(tp)
        assert c.poll(0.3) == {}        # paused: nothing fetched or returned
        c.resume(tp)
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            got += [r.value for rs in c.poll(0.1).values() for r in rs]
        assert got == [b"9", b"10"] and c.highwater(tp) == 11


def test_commit_async_and_committed(broker, topic_name) -> None:
    _create(broker, topic_name, 2)
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                  enable_auto_commit=False, **FAST) as c:
        c.assign(tps)
        assert c.committed(tps) == {tps[0]: None, tps[1]: None}
        done = []
        fut = c.commit_async({tps[0]: 5, tps[1]: 7}, callback=done.append)
        fut.result(10)
        deadline = time.monotonic() + 5
        while not done and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done == [None]
        assert c.committed(tps) == {tps[0]: 5, tps[1]: 7}
        c.poll(0.05)
        # looked up once polled (as in Java): a commit before the first poll counts
        assert c.position(tps[1]) == 7


# ------------------------------------------------------------------------------ faults

@pytest.mark.slow
def test_broker_restart_producer_and_consumer_carry_on(topic_name) -> None:
    from kcodec.testing.tansu import Tansu

    with Tansu() as b:
        cfg = dict(bootstrap_servers=b.bootstrap, request_timeout_ms=3000, api_timeout_ms=20000)
        p = Producer(linger_ms=2, **cfg)
        c = Consumer(auto_offset_reset="earliest", fetch_max_wait_ms=50, **cfg)
        try:
            assert p.send(topic_name, b"before").result(10).offset == 0
            c.assign([TopicPartition(topic_name, i) for i in range(4)])
            got = []
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:
                got += [r.value for rs in c.poll(0.2).values() for r in rs]
            assert got == [b"before"]
            b.restart()   # same port; memory storage: the topic and producer ids are gone
            r = p.send(topic_name, b"after", partition=2).result(30)
            assert r.partition == 2
            c.seek(TopicPartition(topic_name, 2), r.offset)
            deadline = time.monotonic() + 20
            after = []
            while not after and time.monotonic() < deadline:
                after += [x.value for rs in c.poll(0.2).values() for x in rs]
            assert after == [b"after"]
        finally:
            p.close(5)
            c.close()


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_poll_columns(broker, topic_name, codec) -> None:
    _create(broker, topic_name, 2)
    recs = _records(3000, 7)
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5) as p:
        results = [p.send(topic_name, v, key=k, headers=h, timestamp=ts, partition=i % 2)
                   for i, (k, v, h, ts) in enumerate(recs)]
        p.flush()
        results = [f.result(10) for f in results]
    want = {(r.partition, r.offset): rec for r, rec in zip(results, recs, strict=False)}
    got = {}
    tp0 = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([tp0, TopicPartition(topic_name, 1)])
        c.seek(tp0, 10)   # mid-batch: the rows before 10 must not appear
        deadline = time.monotonic() + 30
        while len(got) < len(want) - 10 and time.monotonic() < deadline:
            for tp, cols in c.poll_columns(0.5).items():
                for row in cols.to_pylist():
                    assert (tp.partition, row["offset"]) not in got
                    got[(tp.partition, row["offset"])] = row
        assert c.position(tp0) == 1500
    assert len(got) == len(want) - 10 and min(o for p, o in got if p == 0) == 10
    for key, row in got.items():
        k, v, h, ts = want[key]
        assert (row["key"], row["value"], row["timestamp"]) == (k, v, ts)
        assert [(a, b) for a, b in row["headers"]] == h


def test_aiokafka_producer_to_kcodec_and_kcodec_to_kafka_python(broker, topic_name) -> None:
    """The other Python peers: aiokafka writes (gzip), kcodec reads; kcodec writes (snappy),
    kafka-python reads; keys, null values, headers and timestamps unchanged."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    _create(broker, topic_name + "-a")
    _create(broker, topic_name + "-b")
    recs = [r for r in _records(520, 3) if r[0] is not None or r[1] is not None][:500]

    async def produce() -> None:  # (aiokafka refuses a record with neither key nor value)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
        await p.start()
        try:
            futs = [await p.send(topic_name + "-a", v, key=k, headers=h, timestamp_ms=ts,
                                 partition=i % 4) for i, (k, v, h, ts) in enumerate(recs)]
            await asyncio.gather(*futs)
        finally:
            await p.stop()

    asyncio.run(produce())
    got = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([TopicPartition(topic_name + "-a", i) for i in range(4)])
        deadline = time.monotonic() + 30
        while len(got) < 500 and time.monotonic() < deadline:
            for rs in c.poll(0.5).values():
                got += [(r.key, r.value, list(r.headers), r.timestamp) for r in rs]
    assert sorted(got, key=lambda r: r[3]) == [(k, v, h, ts) for k, v, h, ts in recs]

    with Producer(bootstrap_servers=broker.bootstrap, compression_type="snappy") as p:
        for k, v, h, ts in recs:
            p.send(topic_name + "-b", v, key=k, headers=h, timestamp=ts)
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                       enable_auto_commit=False, fetch_max_wait_ms=50)
    kc.assign([KTP(topic_name + "-b", i) for i in range(4)])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 500 and time.monotonic() < deadline:
        for rs in kc.poll(500).values():
            seen += [(r.key, r.value, [tuple(x) for x in r.headers], r.timestamp) for r in rs]
    kc.close()
    assert sorted(seen, key=lambda r: r[3]) == [(k, v, h, ts) for k, v, h, ts in recs]


def test_auto_offset_reset_none_is_a_clear_error_until_seek(broker, topic_name) -> None:
    from kcodec.client import NoOffsetForPartitionError

    _create(broker, topic_name, 2)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send(topic_name, b"a", partition=0).result(10)
        p.send(topic_name, b"b", partition=1).result(10)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                  auto_offset_reset="none", enable_auto_commit=False, **FAST) as c:
        c.commit({tp1: 0})
        c.assign([tp0, tp1])
        with pytest.raises(NoOffsetForPartitionError,
                           match=rf"^no committed offset for {topic_name}\[0\] and "
                                 r"auto_offset_reset is 'none': seek\(\) to a position first$"):
            c.position(tp0)
        assert c.position(tp1) == 0
        got, err = [], None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (err is None or not got):
            try:   # the committed partition is fetched meanwhile
                got += [r.value for rs in c.poll(0.1).values() for r in rs]
            except NoOffsetForPartitionError as exc:
                err = exc
        assert err is not None and err.partitions == [tp0] and got == [b"b"]
        c.seek(tp0, 0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(got) < 2:
            got += [r.value for rs in c.poll(0.1).values() for r in rs]
        assert got == [b"b", b"a"]


def test_auto_commit_and_admin_views(broker, topic_name) -> None:
    """Auto-commit (interval and on close) seen through the admin client: committed
    offsets, list_groups, list_offsets, lag and describe_cluster."""
    _create(broker, topic_name, 2)
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    group = f"g-{topic_name}"
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(4):   # one record per batch (see tansu.md on ListOffsets)
            p.send(topic_name, b"%d" % i, partition=0 if i < 3 else 1).result(10)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with Consumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                      auto_offset_reset="earliest", auto_commit_interval_ms=100, **FAST) as c:
            n = 0
            deadline = time.monotonic() + 20
            committed: dict = {}
            while time.monotonic() < deadline and committed != {tps[0]: 3, tps[1]: 1}:
                n += sum(len(rs) for rs in c.poll(0.1).values())
                if n == 4:
                    committed = admin.committed_offsets(group, [topic_name])
            assert n == 4 and committed == {tps[0]: 3, tps[1]: 1}   # by the interval
            assert group in [g.group_id for g in admin.list_groups()]
            assert [g.protocol_type for g in admin.list_groups() if g.group_id == group] == ["consumer"]
        assert admin.list_offsets(tps, "earliest") == {tps[0]: 0, tps[1]: 0}
        assert admin.list_offsets(tps, "latest") == {tps[0]: 3, tps[1]: 1}
        assert [(x.partition, x.committed, x.end_offset, x.lag) for x in admin.lag(group)] == \
            [(0, 3, 3, 0), (1, 1, 1, 0)]
        md = admin.describe_cluster()
        t = next(t for t in md.topics if t.name == topic_name)
        assert [p.partition for p in t.partitions] == [0, 1]
        assert md.controller_id in [b.node_id for b in md.brokers]
        assert all(p.leader in p.replicas and p.leader in p.isr for p in t.partitions)
        assert topic_name in admin.list_topics()
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            p.send(topic_name, b"late", partition=1).result(10)
        with Consumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                      auto_commit_interval_ms=60000, **FAST) as c:
            deadline = time.monotonic() + 20
            got = []
            while time.monotonic() < deadline and not got:
                got += [r.value for rs in c.poll(0.1).values() for r in rs]
            assert got == [b"late"]     # resumed from the committed offsets
        # committed on close (the interval had not come round)
        assert admin.committed_offsets(group, [topic_name]) == {tps[0]: 3, tps[1]: 2}
