"""``Producer.send_values``: a list of bytes values queued a batch at a time, one key for
all (what ``kcodec produce`` sends stdin with, without numpy or pyarrow): the records read
back in order, in the partition given, or of the key (as ``send`` chooses it), or one sticky
partition; cut into batches of ``batch_size``; a value too large alone refuses the call
before anything is queued; a producer with serializers refuses it."""

from __future__ import annotations

import time

import pytest

from kcodec.client import Consumer, Producer, RecordTooLargeError, TopicPartition
from kcodec.murmur import partition_for_key

PARTS = 4


@pytest.fixture(scope="module")
def cluster():
    from kcodec.broker import Cluster

    with Cluster(1) as c:
        for t in ("keyless", "keyed", "given", "big", "many"):
            c.create_topic(t, PARTS)
        yield c


def _read(c, topic: str, expect: int) -> dict[int, list[tuple[bytes | None, bytes]]]:
    out: dict[int, list[tuple[bytes | None, bytes]]] = {}
    with Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50) as con:
        con.assign([TopicPartition(topic, p) for p in range(PARTS)])
        deadline = time.monotonic() + 30
        while sum(map(len, out.values())) < expect and time.monotonic() < deadline:
            for tp, recs in con.poll(0.2).items():
                out.setdefault(tp.partition, []).extend((r.key, r.value) for r in recs)
    return out


def test_keyless_values_go_to_one_partition_in_order(cluster) -> None:
    values = [b"v%d" % i for i in range(1000)]
    with Producer(bootstrap_servers=cluster.bootstrap) as p:
        futures = p.send_values("keyless", values)
        last = futures[-1].result(10)
    got = _read(cluster, "keyless", 1000)
    assert list(got) == [last.partition] and last.offset == 999
    assert got[last.partition] == [(None, v) for v in values]


def test_a_key_picks_the_partition_send_would(cluster) -> None:
    key = b"user-42"
    with Producer(bootstrap_servers=cluster.bootstrap) as p:
        r = p.send_values("keyed", [b"a", b"b", b""], key=key)[-1].result(10)
        assert r.partition == partition_for_key(key, PARTS)
        assert p.send("keyed", b"c", key=key).result(10).partition == r.partition
    assert _read(cluster, "keyed", 4)[r.partition] == [(key, b"a"), (key, b"b"), (key, b""),
                                                       (key, b"c")]


def test_a_partition_given(cluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap) as p:
        assert p.send_values("given", [b"x"], partition=3)[0].result(10).partition == 3
        with pytest.raises(ValueError, match="partition 4 out of range"):
            p.send_values("given", [b"y"], partition=4)
        assert p.send_values("given", []) == []
    assert _read(cluster, "given", 1) == {3: [(None, b"x")]}


def test_batches_of_batch_size(cluster) -> None:
    values = [b"%05d" % i + b"." * 95 for i in range(5000)]    # 500 kB
    with Producer(bootstrap_servers=cluster.bootstrap, batch_size=16384) as p:
        futures = p.send_values("many", values, partition=0)
        assert len(futures) >= 500_000 // 16384
        assert [f.result(10).offset for f in futures][-1] == 4999
    assert _read(cluster, "many", 5000)[0] == [(None, v) for v in values]


def test_a_value_too_large_alone_refuses_the_call(cluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap) as p:
        with pytest.raises(RecordTooLargeError, match="max_request_size"):
            p.send_values("big", [b"small", b"x" * (2 << 20), b"small"], partition=0)
        assert p.send_values("big", [b"after"], partition=0)[0].result(10).offset == 0


def test_serializers_refuse_it(cluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap, value_serializer=lambda v: v) as p:
        with pytest.raises(ValueError, match="value_serializer"):
            p.send_values("keyless", [b"a"])
