"""The key partitioner matches the Java client (via kafka-python and librdkafka's murmur2_random)."""

from __future__ import annotations

import os
import random

import pytest

from kcodec.client.producer.partitioner import (
    DefaultPartitioner,
    StickyPartitioner,
    murmur2,
    partition_for_key,
)

# kafka-python 3 reads its bundled specs with a deprecated importlib.resources call
pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")


def test_murmur2_golden() -> None:
    # Values of the Java client's Utils.murmur2 (its own unit test vectors).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@pytest.mark.peers
def test_murmur2_matches_kafka_python() -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    rng = random.Random(5)
    for n in list(range(64)) + [1000]:
        data = bytes(rng.getrandbits(8) for _ in range(n))
        assert murmur2(data) & 0xFFFFFFFF == kp_murmur2(data) & 0xFFFFFFFF


def test_partition_for_key_bad_count() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_sticky_moves_on_new_batch() -> None:
    sp = StickyPartitioner(random.Random(1))
    p = sp.partition("t", 4)
    assert all(sp.partition("t", 4) == p for _ in range(10))
    moved = set()
    for _ in range(50):   # a uniform draw over all partitions, as Java's (may repeat)
        sp.on_new_batch("t", 4, sp.partition("t", 4))
        moved.add(sp.partition("t", 4))
    assert moved == {0, 1, 2, 3}
    dp = DefaultPartitioner(random.Random(1))
    assert dp("t", b"21", 4) == partition_for_key(b"21", 4)


def test_sticky_switches_after_batch_size_bytes_kip_794() -> None:
    """KIP-794: stay until batch_size bytes went to the partition and its batch is full,
    or 2 * batch_size bytes in any case; Java's default batch size is 16 KiB."""
    from kcodec.client import ProducerConfig

    assert ProducerConfig().batch_size == 16384
    sp = StickyPartitioner(random.Random(7), batch_size=1000)
    p = sp.partition("t", 1000)
    for _ in range(9):
        sp.on_append("t", 1000, p, 100, batch_full=False)
    assert sp.partition("t", 1000) == p
    sp.on_append("t", 1000, p, 100, batch_full=False)    # 1000 bytes, batch not ready: stay
    assert sp.partition("t", 1000) == p
    sp.on_append("t", 1000, p, 100, batch_full=True)     # 1100 bytes and a full batch: go
    q = sp.partition("t", 1000)
    assert q != p
    for _ in range(19):
        sp.on_append("t", 1000, q, 100, batch_full=False)
    assert sp.partition("t", 1000) == q
    sp.on_append("t", 1000, q, 100, batch_full=False)    # 2 * batch_size: go regardless
    assert sp.partition("t", 1000) != q


def test_sticky_is_adaptive_to_queue_lengths() -> None:
    """Partitions with long queues of unsent batches (a slow broker) are drawn less often,
    in proportion to (longest queue + 1 - queue); equal queues draw uniformly."""
    sp = StickyPartitioner(random.Random(3), batch_size=10)
    sp.update_load("t", [9, 0, 0, 0])     # weights 1, 10, 10, 10
    counts = [0] * 4
    for _ in range(31000):
        sp.on_new_batch("t", 4, sp.partition("t", 4))
        counts[sp.partition("t", 4)] += 1
    assert 600 < counts[0] < 1400 and all(9000 < c < 11000 for c in counts[1:])
    sp.update_load("t", [2, 2, 2, 2])
    counts = [0] * 4
    for _ in range(8000):
        sp.on_new_batch("t", 4, sp.partition("t", 4))
        counts[sp.partition("t", 4)] += 1
    assert all(1700 < c < 2300 for c in counts)


@pytest.mark.broker
def test_same_partition_as_librdkafka_murmur2_random(broker, topic_name) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic_name, num_partitions=7)]).values():
        f.result(10)
    prod = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                     "partitioner": "murmur2_random", "linger.ms": 5})
    keys = [os.urandom(random.randint(0, 40)) for _ in range(300)] + [b"", b"21", b"abc"]
    got: dict[bytes, int] = {}

    def cb(err, msg) -> None:
        assert err is None, err
        got[msg.key()] = msg.partition()

    for k in keys:
        prod.produce(topic_name, b"v", key=k, on_delivery=cb)
    assert prod.flush(20) == 0
    assert len(got) == len(set(keys))
    for k, p in got.items():
        assert partition_for_key(k, 7) == p, k


def test_murmur_twins_agree(pair) -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    cy, py = pair("murmur")

    @given(st.binary(max_size=64), st.integers(1, 1000))
    def check(data: bytes, n: int) -> None:
        assert cy.murmur2(data) == py.murmur2(data)
        assert cy.murmur2(bytearray(data)) == py.murmur2(memoryview(data))
        assert cy.partition_for_key(data, n) == py.partition_for_key(data, n)

    check()
    for mod in (cy, py):
        with pytest.raises(ValueError, match="partition count must be positive"):
            mod.partition_for_key(b"k", 0)
        with pytest.raises(TypeError, match="bytes-like object is required"):
            mod.murmur2(12)
