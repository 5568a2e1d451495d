"""No record is skipped when a fetch in flight outlives a rebalance.

Under an eager (classic) rebalance the consumer gives up every partition and gets some of
them back: their new state starts with no position, which the committed offset then gives.
A Fetch sent before the revocation, from the old *fetch* position (ahead of what the
application was handed: the fetcher prefetches), could still be answered after the
partition came back. Its blob was taken as the continuation of the new position, so the
records between the committed offset and the old fetch position were never delivered to
anyone (the classic-protocol loss: whole fetched batches missing on a partition a member
kept through the rebalance). A fetch answer is kept only if it answers the state it was
asked for (its epoch, never reused by a new state) at the offset that state still fetches
from, as Java's fetcher checks; and a blob that does not continue from the position is
fetched again, never skipped over.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.fetcher import Fetcher
from kcodec.client.consumer.positions import SubscriptionState
from kcodec.client.consumer.visibility import Fetched
from kcodec.client.net.cluster import TopicInfo
from kcodec.client.structs import TopicPartition
from kcodec.records import RecordBatchBuilder

TP = TopicPartition("t", 0)


def _batch(base: int, n: int) -> bytes:
    b = RecordBatchBuilder(base_offset=base)
    for i in range(n):
        b.append(None, b"%d" % (base + i), None, 1000)
    return b.build()


class _Broker:
    """The little of a Cluster a Fetch takes; ``send`` waits until the test answers."""

    def __init__(self) -> None:
        self.topics = {"t": TopicInfo("t", 0, partitions={0: 1})}
        self.topic_names: dict[Any, str] = {}
        self.stale = False
        self.metrics = None
        self.debug = SimpleNamespace(fetch=False)
        self.asked: list[int] = []          # the fetch offset of each Fetch sent
        self.answers: asyncio.Queue = asyncio.Queue()

    async def connection(self, node: int) -> Any:
        return SimpleNamespace(core=SimpleNamespace(version=lambda key: 11))

    async def refresh(self, topics: Any = None, auto_create: bool = False) -> None:
        pass

    def invalidate(self) -> None:
        pass

    def by_topic_id(self, api_key: int, version: int, topics: Any) -> tuple[int, None]:
        return version, None            # topics by name (the version is below 13)

    async def request(self, node: int, req: Any, version: int, timeout: float) -> Any:
        off = req.topics[0].partitions[0].fetch_offset
        self.asked.append(off)
        data = await self.answers.get()
        part = SimpleNamespace(partition_index=0, error_code=0, high_watermark=1000,
                               log_start_offset=0, records=data, aborted_transactions=None)
        return SimpleNamespace(
            error_code=0, session_id=0, responses=[SimpleNamespace(topic="t", partitions=[part])])


def _fetcher(loop: asyncio.AbstractEventLoop, broker: _Broker, subs: SubscriptionState) -> Fetcher:
    async def resolve(skip: Any) -> None:
        return None
    cfg = ConsumerConfig(bootstrap_servers="127.0.0.1:1", group_id="g")
    return Fetcher(cfg, loop, broker, subs, resolve)  # type: ignore[arg-type]


def _offsets(out: dict) -> list[int]:
    return [r.offset for r in out.get(TP, [])]


def test_a_fetch_answered_after_an_eager_rebalance_does_not_skip_records() -> None:
    async def go() -> tuple[list[int], list[int]]:
        subs = SubscriptionState()
        with subs.lock:
            subs.assign({TP})
            subs.set_position(TP, 50)
        # the application was handed 0..49; the fetcher has prefetched up to 100 (a blob
        # buffered, not yet handed out), and a Fetch from 100 is at the broker
        subs.states[TP].fetch_position = 100
        broker = _Broker()
        f = _fetcher(asyncio.get_running_loop(), broker, subs)
        await f._launch()
        await asyncio.sleep(0)
        assert broker.asked == [100]
        # the eager rebalance: everything revoked, the partition given back, its position
        # from the committed offset (50: what the application had been handed)
        with subs.lock:
            subs.assign(set())
            f.drop(lambda b: True)
            subs.assign({TP})
            subs.set_position(TP, 50)
        broker.answers.put_nowait(_batch(100, 50))       # the old Fetch's answer arrives
        for _ in range(20):
            await asyncio.sleep(0)
        got = _offsets(f.take(1000))
        # the fetcher goes on from where the application stands
        await f._launch()
        await asyncio.sleep(0)
        broker.answers.put_nowait(_batch(50, 100))
        for _ in range(20):
            await asyncio.sleep(0)
        got += _offsets(f.take(1000))
        return got, broker.asked

    got, asked = asyncio.run(go())
    assert got == list(range(50, 150))
    assert asked[1] == 50


def test_a_new_partition_state_never_reuses_an_epoch() -> None:
    subs = SubscriptionState()
    seen = set()
    for _ in range(5):
        with subs.lock:
            subs.assign({TP})
            seen.add(subs.states[TP].epoch)
            subs.seek(TP, 3)
            seen.add(subs.states[TP].epoch)
            subs.assign(set())
    assert len(seen) == 10


def test_a_blob_that_does_not_continue_from_the_position_is_fetched_again() -> None:
    """Whatever put it there, a buffered blob that starts past the position is not
    decoded over the gap: it is dropped and the partition fetched again from the
    position."""
    subs = SubscriptionState()
    with subs.lock:
        subs.assign({TP})
        subs.set_position(TP, 50)
    st = subs.states[TP]
    st.fetch_position = 150
    loop = asyncio.new_event_loop()
    try:
        f = _fetcher(loop, _Broker(), subs)
        f.buffer.append(Fetched(TP, 100, _batch(100, 50), None, st.epoch))
        f.buffered_bytes = len(f.buffer[0].data)
        assert f.take(1000) == {}
        assert not f.buffer and f.buffered_bytes == 0
        st = subs.states[TP]
        assert (st.position, st.fetch_position) == (50, 50)
        f.buffer.append(Fetched(TP, 100, _batch(100, 50), None, st.epoch))
        f.buffered_bytes = len(f.buffer[0].data)
        assert f.take_columns() == {}
        assert (subs.states[TP].position, subs.states[TP].fetch_position) == (50, 50)
    finally:
        loop.close()
