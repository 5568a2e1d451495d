"""The producer refuses a record larger than max_request_size (default 1 MiB, as Java) or
buffer_memory before accepting it, as Java's RecordTooLargeException: from send, in the
compiled fast path and the general path, the asyncio producer and send_columns; nothing
of it is sent."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.client import AsyncProducer, Producer, RecordTooLargeError
from kcodec.client.config import ProducerConfig
from kcodec.errors import KcodecError


@pytest.fixture(scope="module")
def cluster():
    from kcodec.broker import Cluster

    with Cluster(1) as c:
        c.create_topic("lim", 2)
        yield c


def _produced(c) -> int:
    return sum(len(p.records or b"") for r in c.recorded("Produce")
               for t in r.body.topic_data for p in t.partition_data)


def test_max_request_size_is_javas_default() -> None:
    assert ProducerConfig().max_request_size == 1048576
    assert ProducerConfig(max_request_size="2048").max_request_size == 2048
    with pytest.raises(ValueError, match="max_request_size must be positive"):
        ProducerConfig(max_request_size=0)


@pytest.mark.parametrize("key", [b"k", None], ids=["keyed (fast path)", "keyless"])
def test_a_record_over_max_request_size_is_refused_by_send(cluster, key) -> None:
    cluster.record()
    cluster.requests.clear()
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=1) as p:
        p.send("lim", b"warm", key=key).result(10)            # metadata known, batches open
        p.send("lim", b"v" * 1000, key=key)                   # an open batch to go into
        with pytest.raises(RecordTooLargeError) as info:
            p.send("lim", b"x" * (2 << 20), key=key)
        assert p.send("lim", b"after", key=key).result(10).offset >= 0
    e = info.value
    assert isinstance(e, KcodecError) and not e.retriable and e.name == "MESSAGE_TOO_LARGE"
    assert e.setting == "max_request_size" and e.limit == 1048576 and e.size > 2 << 20
    assert "more than max_request_size (1048576)" in str(e)
    assert _produced(cluster) < 1 << 20                       # nothing of it went out


def test_a_record_between_batch_size_and_max_request_size_goes_alone(cluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap, batch_size=16384) as p:
        assert p.send("lim", b"y" * 500_000, key=b"k").result(10).offset >= 0


def test_a_smaller_max_request_size_caps_batches_in_the_fast_path_too(cluster) -> None:
    """A max_request_size below batch_size: a record over it is refused even when an open
    batch has room for it (the batches never grow past max_request_size)."""
    with Producer(bootstrap_servers=cluster.bootstrap, max_request_size=4000,
                  batch_size=1 << 20, linger_ms=200) as p:
        p.send("lim", b"a", key=b"k").result(10)
        p.send("lim", b"a", key=b"k")                         # the open batch stays open
        with pytest.raises(RecordTooLargeError, match="max_request_size"):
            p.send("lim", b"z" * 5000, key=b"k")
        futs = [p.send("lim", b"w" * 1000, key=b"k") for _ in range(10)]
        assert all(f.result(10).offset >= 0 for f in futs)   # in batches under 4000 bytes


def test_buffer_memory_smaller_than_the_record(cluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap, buffer_memory=10_000) as p:
        with pytest.raises(RecordTooLargeError, match="more than buffer_memory"):
            p.send("lim", b"q" * 20_000)


def test_the_asyncio_producer_refuses_it_too(cluster) -> None:
    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap) as p:
            with pytest.raises(RecordTooLargeError):
                await p.send("lim", b"x" * (2 << 20), key=b"k")
            assert (await p.send_and_wait("lim", b"ok", key=b"k")).offset >= 0
    asyncio.run(main())


@pytest.mark.arrow
def test_send_columns_refuses_a_row_too_large_before_queuing_any(cluster) -> None:
    import pyarrow as pa

    cluster.record()
    cluster.requests.clear()
    with Producer(bootstrap_servers=cluster.bootstrap) as p:
        values = pa.array([b"s1", b"x" * (2 << 20), b"s2"], type=pa.binary())
        with pytest.raises(RecordTooLargeError, match="max_request_size"):
            p.send_columns("lim", values)
        p.flush()
    assert _produced(cluster) == 0
