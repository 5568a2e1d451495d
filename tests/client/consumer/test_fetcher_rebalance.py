"""The fetcher outlives a rebalance that takes partitions away while it waits for metadata.

Found by the fault tests: a member whose partition was revoked while the fetcher refreshed
the metadata for it never fetched again (KeyError in the fetcher's task, which ended
silently; poll() then reported "no Fetch could be sent" every api_timeout_ms forever).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kcodec.client import ConsumerConfig, TopicPartition
from kcodec.client.consumer.fetcher import Fetcher
from kcodec.client.consumer.positions import SubscriptionState
from kcodec.client.net.cluster import TopicInfo

TP = TopicPartition("t", 0)


class _Cluster:
    """The little of a Cluster the fetcher's launch step asks; ``refresh`` runs ``during``."""

    def __init__(self, during: Any) -> None:
        self.topics: dict[str, TopicInfo] = {}
        self.stale = False
        self.during = during
        self.refreshes = 0

    async def refresh(self, topics: list[str], auto_create: bool = False) -> None:
        self.refreshes += 1
        await asyncio.sleep(0)
        self.during()
        self.topics["t"] = TopicInfo("t", 0, partitions={0: 1})

    def invalidate(self) -> None:
        pass


def _fetcher(during: Any) -> tuple[Fetcher, SubscriptionState, _Cluster]:
    subs = SubscriptionState()
    with subs.lock:
        subs.assign({TP})
        subs.seek(TP, 5)
    cluster = _Cluster(during)

    async def resolve(_tps: set[TopicPartition]) -> None:
        pass

    loop = asyncio.get_running_loop()
    return Fetcher(ConsumerConfig(), loop, cluster, subs, resolve), subs, cluster  # type: ignore[arg-type]


def test_a_partition_revoked_during_the_metadata_refresh_is_skipped() -> None:
    async def go() -> dict[int, float]:
        subs_box: list[SubscriptionState] = []

        def revoke() -> None:           # the rebalance, in the polling thread meanwhile
            with subs_box[0].lock:
                subs_box[0].assign(set())
        f, subs, _cluster = _fetcher(revoke)
        subs_box.append(subs)
        await f._launch()               # before: KeyError
        return f.inflight
    assert asyncio.run(go()) == {}


def test_an_unexpected_error_reaches_poll_and_the_fetcher_goes_on() -> None:
    async def go() -> tuple[BaseException | None, int, bool]:
        def boom() -> None:
            if cluster.refreshes == 1:
                raise RuntimeError("a bug")
        f, _subs, cluster = _fetcher(boom)
        f.start()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if cluster.refreshes >= 1 and f.error is not None:
                break
        f.kick()
        for _ in range(200):            # and it is still there: it refreshes again
            await asyncio.sleep(0.01)
            if cluster.refreshes >= 2:
                break
        alive = f.task is not None and not f.task.done()
        f.stop()
        return f.error, cluster.refreshes, alive
    error, refreshes, alive = asyncio.run(go())
    assert isinstance(error, RuntimeError) and str(error) == "a bug"
    assert refreshes >= 2 and alive
