"""The fetcher's task against assignment changes made while it awaits (a rebalance runs
in the thread that polls, the fetcher on the client's loop): it must carry on, never die."""

from __future__ import annotations

import asyncio
from typing import Any

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

        async def fetch(node: int, parts: list) -> None:
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
