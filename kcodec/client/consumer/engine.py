"""The consumer's engine: the parts one consumer is made of, and what joins them.

    cluster     connections and metadata (kcodec.client.net.cluster)
    group       membership, when there is a ``group_id``: classic (classic_group.py) or
                the consumer protocol (consumer_group.py, KIP-848)
    subs        the assignment and positions (positions.py)
    fetcher     fetch requests and the buffer of fetched blobs (fetcher.py)

The engine changes the assignment and seeks (dropping what the fetcher buffered for a
partition in the same step), looks up missing positions (committed offsets, else the
reset policy: ``reset_positions``, which the fetcher calls), and closes. The facades
(facade.py) run on it; its coroutines run on the client's loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.classic_group import ClassicGroupMember
from kcodec.client.consumer.fetcher import Fetcher
from kcodec.client.consumer.offsets import EARLIEST, LATEST, list_offsets
from kcodec.client.consumer.positions import SubscriptionState
from kcodec.client.errors import NoOffsetForPartitionError
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition

__all__ = ["ConsumerEngine"]


def _group_member(cluster: Cluster, config: ConsumerConfig) -> ClassicGroupMember:
    if config.group_protocol == "consumer":   # KIP-848: the broker assigns
        from kcodec.client.consumer.consumer_group import ConsumerGroupMember

        return ConsumerGroupMember(cluster, config)
    return ClassicGroupMember(cluster, config)


class ConsumerEngine:
    """One consumer's state and parts (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.cluster = Cluster(config)
        self.group = _group_member(self.cluster, config) if config.group_id else None
        self.subs = SubscriptionState()
        self.fetcher = Fetcher(config, loop, self.cluster, self.subs, self.reset_positions)
        self.read_committed = self.fetcher.read_committed
        self.last_commit = time.monotonic()
        if self.cluster.metrics is not None:
            from kcodec.client.consumer.observe import statistics_part
            self.cluster.stats_parts["consumer"] = statistics_part(self)

    @property
    def closed(self) -> bool:
        return self.fetcher.closed

    def start(self) -> None:
        self.fetcher.start()

    # ------------------------------------------------------------------ assignment
    def set_assignment(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        with self.subs.lock:
            self.subs.assign(tps)
            self.fetcher.drop(lambda f: f.tp not in tps)
        if self.cluster.metrics is not None:
            self.cluster.metrics.assigned(self.subs.states)
        self.fetcher.kick()

    def seek(self, tp: TopicPartition, offset: int | None) -> None:
        fetcher = self.fetcher
        with self.subs.lock:
            self.subs.seek(tp, offset)
            fetcher.drop(lambda f: f.tp == tp)
            err = fetcher.error
            if isinstance(err, NoOffsetForPartitionError) and tp in err.partitions:
                left = [x for x in err.partitions if x != tp]   # that one is answered now
                fetcher.error = NoOffsetForPartitionError(left) if left else None
        fetcher.kick()

    def rewind_held(self) -> None:
        """An iterator stopped with records not handed out: fetch them again next time."""
        held = dict(self.subs.held)
        self.subs.held.clear()
        if self.closed:
            return
        for tp, off in held.items():
            st = self.subs.states.get(tp)
            if st is not None and st.position is not None and st.position != off:
                self.seek(tp, off)

    # ------------------------------------------------------------------ positions
    async def reset_positions(self, skip: set[TopicPartition] | frozenset = frozenset()) -> None:
        """Give every assigned partition without a position one: committed, else the policy."""
        subs = self.subs
        missing = subs.missing(skip)
        if not missing:
            return
        committed: dict[TopicPartition, int] = {}
        if self.group is not None:
            committed = await self.group.fetch_offsets(missing)
        reset = []
        for tp in missing:
            off = committed.get(tp, -1)
            if off >= 0:
                subs.set_position(tp, off)
            else:
                reset.append(tp)
        # a seek() while OffsetFetch was in flight has answered those already
        reset = [tp for tp in reset if tp in subs.states and subs.states[tp].position is None]
        if reset:
            policy = self.config.auto_offset_reset
            if policy == "none":
                raise NoOffsetForPartitionError(sorted(reset))
            offs = await list_offsets(self.cluster, reset, EARLIEST if policy == "earliest" else LATEST,
                                      self.read_committed)
            for tp, off in offs.items():
                subs.set_position(tp, off)

    # ------------------------------------------------------------------ lifecycle
    async def abort(self) -> None:
        """Stop at once: no commit, no LeaveGroup; just drop the connections."""
        self.fetcher.stop()
        if self.group is not None and self.group.hb_task is not None:
            self.group.hb_task.cancel()
        await self.cluster.close()

    async def close(self) -> None:
        self.fetcher.stop()
        if self.group is not None:
            await self.group.leave()
        await self.cluster.close()
