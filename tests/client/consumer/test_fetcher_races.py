"""The fetcher against what a broker restart brings: assignment changes made while it awaits
(a rebalance runs in the thread that polls, the fetcher on the client's loop; it must carry
on, never die), group requests queued behind parked fetches, and corrupt batches (named)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.fetcher import Fetcher
from kcodec.client.consumer.positions import SubscriptionState
from kcodec.client.net.cluster import TopicInfo
from kcodec.client.structs import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Cluster:
    """Metadata unknown until ``refresh``, which a rebalance interleaves with."""

    def __init__(self, during_refresh: Any) -> None:
        self.topics: dict[str, TopicInfo] = {}
        self.stale = True
        self.during_refresh = during_refresh
        self.refreshed = 0

    async def refresh(self, topics: Any = None, auto_create: bool = False) -> None:
        await asyncio.sleep(0)
        self.during_refresh()
        self.topics["t"] = TopicInfo("t", 0, partitions={0: 1, 1: 1})
        self.stale = False
        self.refreshed += 1


def _fetcher(loop: asyncio.AbstractEventLoop, cluster: Any, subs: SubscriptionState) -> Fetcher:
    async def resolve(skip: Any) -> None:
        return None

    cfg = ConsumerConfig(bootstrap_servers="127.0.0.1:1", group_id="g")
    return Fetcher(cfg, loop, cluster, subs, resolve)


def test_a_partition_revoked_while_metadata_is_refreshed_is_skipped() -> None:
    subs = SubscriptionState()
    subs.assign({TP0, TP1})
    for tp in (TP0, TP1):
        subs.states[tp].position = subs.states[tp].fetch_position = 0

    def rebalance() -> None:     # partition 0 goes to another member meanwhile
        with subs.lock:
            subs.assign({TP1})

    sent: list = []
    loop = asyncio.new_event_loop()
    try:
        cluster = _Cluster(rebalance)
        f = _fetcher(loop, cluster, subs)

        async def fetch(node: int, parts: list, short: bool = False, epochs: Any = None) -> None:
            sent.append((node, parts))

        f._fetch = fetch     # type: ignore[method-assign]
        loop.run_until_complete(f._launch())
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert cluster.refreshed == 1
    assert sent == [(1, [(TP1, 0)])]


def test_a_fetch_loop_that_died_is_reported_not_silent() -> None:
    subs = SubscriptionState()
    loop = asyncio.new_event_loop()
    try:
        f = _fetcher(loop, _Cluster(lambda: None), subs)
        assert f.stopped() is None

        async def broken() -> None:
            raise KeyError("a bug")

        f.task = loop.create_task(broken())
        loop.run_until_complete(asyncio.sleep(0))
        err = f.stopped()
        assert err is not None and "KeyError" in str(err) and "create a new one" in str(err)
        assert err.retriable is False  # type: ignore[attr-defined]
        f.closed = True               # closing the consumer is not an error
        assert f.stopped() is None
    finally:
        loop.close()


def test_group_requests_have_a_connection_of_their_own() -> None:
    """A broker answers one connection's requests in order: a commit or heartbeat sent on
    the fetch connection waited behind a fetch parked for fetch_max_wait_ms (the runtime's
    commits lagged half a second each, and a broker restart then re-delivered that much)."""
    from kcodec.broker import Cluster

    with Cluster(1) as kb:
        _group_connection(kb.bootstrap)


def _group_connection(boot: str) -> None:
    from kcodec.client import Consumer, Producer
    from kcodec.client.net.cluster import broker_of, coordinator_channel
    from kcodec.protocol import ApiKey

    with Producer(bootstrap_servers=boot) as p:
        p.send("conn-t", b"v", partition=0)
        p.flush(10)
    with Consumer(bootstrap_servers=boot, group_id="conn-g", enable_auto_commit=False,
                  auto_offset_reset="earliest", fetch_max_wait_ms=5000,
                  heartbeat_interval_ms=100) as c:
        cluster = c._engine.cluster
        sent: list = []
        real = cluster.request

        async def spy(node_id: Any, req: Any, *a: Any, **k: Any) -> Any:
            sent.append((node_id, req.API_KEY))
            return await real(node_id, req, *a, **k)

        cluster.request = spy      # type: ignore[method-assign]
        c.subscribe(["conn-t"])
        got = 0
        for _ in range(100):
            got += sum(len(v) for v in c.poll(0.1).values())
            if got:
                break
        assert got == 1
        c.commit({TopicPartition("conn-t", 0): 1})
        fetch_nodes = {n for n, k in sent if k == ApiKey.FETCH}
        group_nodes = {n for n, k in sent if k in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                                                   ApiKey.OFFSET_COMMIT, ApiKey.HEARTBEAT)}
        assert fetch_nodes and group_nodes
        assert not fetch_nodes & group_nodes
        (node,) = fetch_nodes
        assert group_nodes == {coordinator_channel(node)} and broker_of(coordinator_channel(node)) == node


def _corrupt_batch(base: int) -> bytes:
    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder(base_offset=base)
    for i in range(3):
        b.append(None, b"v%d" % i, None, 1000)
    data = bytearray(b.build())
    data[-1] ^= 0xFF          # a record byte: the batch's CRC-32C no longer matches
    return bytes(data)


def test_a_corrupt_fetched_batch_names_topic_partition_and_offset() -> None:
    import pickle

    from kcodec.client.consumer.visibility import Fetched
    from kcodec.errors import ChecksumError, DecodeError, FetchedBatchError

    subs = SubscriptionState()
    subs.assign({TP0})
    subs.states[TP0].position = subs.states[TP0].fetch_position = 7
    loop = asyncio.new_event_loop()
    try:
        f = _fetcher(loop, _Cluster(lambda: None), subs)
        f.buffer.append(Fetched(TP0, 7, _corrupt_batch(7), None, subs.states[TP0].epoch))
        for take in (lambda: f.take(10), lambda: f.take(10), f.take_columns):
            with pytest.raises(FetchedBatchError) as err:
                take()
            e = err.value
            assert (e.topic, e.partition, e.fetch_offset) == ("t", 0, 7)
            assert isinstance(e, DecodeError) and isinstance(e.__cause__, ChecksumError)
            assert "t[0] at offset 7" in str(e) and "CRC" in e.cause and "seek past" in str(e)
            assert subs.states[TP0].position == 7      # it stays there: nothing skipped
        assert str(pickle.loads(pickle.dumps(e))) == str(e)
    finally:
        loop.close()
