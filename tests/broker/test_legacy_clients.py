"""Old-format clients end to end against the kcodec broker.

kafka-python pinned to ``api_version=(0, 10)`` speaks Produce v2 / Fetch v2 with magic 1
messages, and pinned to ``(0, 9)`` Produce v1 / Fetch v1 with magic 0. librdkafka with
``api.version.request=false`` and ``broker.version.fallback=0.9.0`` speaks Produce v1 /
Fetch v1; librdkafka against a broker whose Produce and Fetch versions are capped at 2 and 3
writes magic 1. Each produces and consumes with every codec the old format allows, commits,
and the recorded requests prove which versions were spoken. kcodec's own legacy paths
(MessageSetBuilder, iter_batches) go through Produce v0-v2 and Fetch v0-v3 on raw sockets,
and v2 batches written by a modern client are down-converted for old fetchers.
"""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import ErrorCode, FetchRequest, ProduceRequest
from kcodec.records import MessageSetBuilder, RecordBatchBuilder, iter_batches
from tests.support.broker_raw import Raw

pytestmark = pytest.mark.peers

N = 200
OLD_CODECS = ["none", "gzip", "snappy", "lz4"]   # zstd needs magic 2


def _codecs(default: str) -> list:
    """Every old codec; all but ``default`` are slow (the matrix costs ~1 s a case)."""
    return [c if c == default else pytest.param(c, marks=pytest.mark.slow) for c in OLD_CODECS]


def expected(n: int = N) -> list[bytes]:
    return [b"v%05d" % i for i in range(n)]


def versions(cluster: Cluster, api: int) -> set[int]:
    return {r.api_version for r in cluster.recorded(api)}


def kp_round_trip(bootstrap: str, api_version: tuple, codec: str, topic: str = "t",
                  produce: bool = True) -> list:
    import kafka

    if produce:
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version,
                                compression_type=None if codec == "none" else codec, linger_ms=5)
        for i in range(N):
            p.send(topic, b"v%05d" % i, key=b"k%d" % (i % 7))
        p.flush(30)
        p.close()
    c = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, api_version=api_version,
                            group_id="g-old", auto_offset_reset="earliest",
                            enable_auto_commit=False)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=300).values():
            got += recs
    c.commit()
    committed = sum(c.committed(kafka.TopicPartition(topic, i)) or 0 for i in range(2))
    c.close()
    assert committed == N
    return got


@pytest.mark.parametrize("codec", _codecs("gzip"))
@pytest.mark.parametrize("api_version, produce_v, fetch_v", [((0, 10), 2, 2), ((0, 9), 1, 1)])
def test_kafka_python_old_versions_every_codec(codec, api_version, produce_v, fetch_v):
    with Cluster(1, num_partitions=2) as c:
        c.record(True)
        got = kp_round_trip(c.bootstrap, api_version, codec)
        assert sorted(r.value for r in got) == expected()
        for part in (0, 1):
            offs = [r.offset for r in got if r.partition == part]
            assert offs == list(range(len(offs)))
        if api_version == (0, 9):
            assert all(r.timestamp is None for r in got)     # magic 0: no timestamps
        else:
            assert all(r.timestamp > 1_600_000_000_000 for r in got)
        assert versions(c, 0) == {produce_v} and versions(c, 1) == {fetch_v}
        assert versions(c, 2) == {0}                          # ListOffsets v0
        # stored as the client wrote it: magic 1 (0.10) or 0 (0.9)
        log = c.nodes[0].cluster.state.partition("t", 0).log
        magics = {b.magic for b in iter_batches(log.read(0, 1 << 20))}
        assert magics == {1 if api_version == (0, 10) else 0}


def ck_round_trip(bootstrap: str, codec: str, **conf) -> list:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                     "linger.ms": 5, **conf})
    errors = []
    for i in range(N):
        p.produce("t", b"v%05d" % i, key=b"k%d" % (i % 7),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0 and not errors
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-ck-old",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe(["t"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m)
    c.commit(asynchronous=False)
    committed = c.committed([ck.TopicPartition("t", i) for i in range(2)], timeout=10)
    c.close()
    assert sum(tp.offset for tp in committed) == N
    return got


@pytest.mark.parametrize("codec", _codecs("snappy"))
def test_librdkafka_broker_version_fallback_0_9_every_codec(codec):
    with Cluster(1, num_partitions=2) as c:
        c.record(True)
        got = ck_round_trip(c.bootstrap, codec, **{"api.version.request": False,
                                                   "broker.version.fallback": "0.9.0"})
        assert sorted(m.value() for m in got) == expected()
        assert versions(c, 0) == {1} and versions(c, 1) == {1}
        assert 18 not in {r.api_key for r in c.recorded()}    # no ApiVersions asked


@pytest.mark.parametrize("codec", _codecs("lz4"))
def test_librdkafka_on_a_broker_capped_below_magic_2_every_codec(codec):
    with Cluster(1, num_partitions=2) as c:
        c.cap_versions("Produce", 2)
        c.cap_versions("Fetch", 3)
        c.record(True)
        got = ck_round_trip(c.bootstrap, codec)
        assert sorted(m.value() for m in got) == expected()
        assert all(m.timestamp()[1] > 1_600_000_000_000 for m in got)
        assert max(versions(c, 0)) == 2 and max(versions(c, 1)) <= 3
        log = c.nodes[0].cluster.state.partition("t", 0).log
        assert {b.magic for b in iter_batches(log.read(0, 1 << 20))} == {1}


@pytest.mark.parametrize("api_version, magic", [((0, 10), 1), ((0, 9), 0)])
def test_v2_batches_are_down_converted_for_old_kafka_python(api_version, magic):
    import confluent_kafka as ck

    with Cluster(1, num_partitions=2) as c:
        p = ck.Producer({"bootstrap.servers": c.bootstrap, "compression.type": "gzip",
                         "linger.ms": 5})
        for i in range(N):
            p.produce("t", b"v%05d" % i, key=b"k%d" % (i % 7))
        assert p.flush(30) == 0
        got = kp_round_trip(c.bootstrap, api_version, "none", produce=False)
        assert sorted(r.value for r in got) == expected()
        assert {r.key for r in got} == {b"k%d" % i for i in range(7)}
        assert (magic == 0) == all(r.timestamp is None for r in got)


def _produce(raw: Raw, version: int, records: bytes, topic: str = "t") -> int:
    P = ProduceRequest
    resp = raw.call(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])]), version)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0, ErrorCode(part.error_code)
    return part.base_offset


def _fetch(raw: Raw, version: int, offset: int, topic: str = "t") -> tuple[int, bytes]:
    F = FetchRequest
    resp = raw.call(F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]), version)
    part = resp.responses[0].partitions[0]
    return part.error_code, bytes(part.records or b"")


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_kcodec_legacy_paths_through_old_produce_and_fetch(codec):
    with Cluster(1, num_partitions=1) as c, Raw(c.bootstrap) as raw:
        c.create_topic("t")
        # Produce v0 and v1 with magic 0, v2 with magic 1 (as the old clients did)
        for version, magic in ((0, 0), (1, 0), (2, 1)):
            b = MessageSetBuilder(magic=magic, compression=codec)
            for i in range(3):
                b.append(b"k", b"m%d-%d" % (version, i), timestamp=1_700_000_000_000 + i if magic else None)
            assert _produce(raw, version, b.build()) == 3 * version
        # and a v2 batch through Produce v3
        b2 = RecordBatchBuilder(compression=codec)
        for i in range(3):
            b2.append(b"k", b"m3-%d" % i, timestamp=1_700_000_000_100 + i)
        assert _produce(raw, 3, b2.build()) == 9
        want = [b"m%d-%d" % (v, i) for v in range(4) for i in range(3)]
        for version in range(0, 5):
            code, data = _fetch(raw, version, 0)
            assert code == 0
            batches = list(iter_batches(data))
            assert all(b.validate_crc() for b in batches)
            top = 0 if version <= 1 else 1 if version <= 3 else 2
            assert max(b.magic for b in batches) == top
            recs = [r for b in batches for r in b]
            assert [r.value for r in recs] == want and [r.offset for r in recs] == list(range(12))
        # a fetch from the middle of a converted batch still starts where asked
        code, data = _fetch(raw, 2, 10)
        assert [r.offset for b in iter_batches(data) for r in b if r.offset >= 10] == [10, 11]


def test_old_fetch_of_zstd_is_unsupported_compression_type():
    with Cluster(1, num_partitions=1) as c, Raw(c.bootstrap) as raw:
        c.create_topic("t")
        b = RecordBatchBuilder(compression=4)
        b.append(b"k", b"z")
        _produce(raw, 7, b.build())
        assert _fetch(raw, 3, 0)[0] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert _fetch(raw, 4, 0)[0] == 0


def test_api_versions_advertise_the_old_versions():
    from kcodec.protocol import ApiVersionsRequest

    with Cluster(1) as c, Raw(c.bootstrap) as raw:
        resp = raw.call(ApiVersionsRequest(), 0)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14):   # what the old clients use
        assert ranges[key][0] == 0, key


@pytest.mark.parametrize("api_version", [(0, 10), (0, 9)])
def test_kcodec_consumer_reads_what_old_kafka_python_wrote(api_version):
    """Magic 0/1 message sets stored as written, served as-is to kcodec's modern Fetch."""
    import kafka

    from kcodec.client import Consumer

    with Cluster(1, num_partitions=1) as c:
        p = kafka.KafkaProducer(bootstrap_servers=c.bootstrap, api_version=api_version,
                                compression_type="gzip", linger_ms=5)
        for i in range(N):
            p.send("t", b"v%05d" % i, key=b"k")
        p.flush(30)
        p.close()
        con = Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest")
        con.assign([("t", 0)])
        got = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < N and time.monotonic() < deadline:
                for recs in con.poll(0.2).values():
                    got += recs
        finally:
            con.close()
    assert [r.value for r in got] == expected() and [r.offset for r in got] == list(range(N))
    assert all((r.timestamp is None or r.timestamp < 0) == (api_version == (0, 9)) for r in got)
