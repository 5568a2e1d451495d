"""The consumer's engine: the parts one consumer is made of, and what joins them.

    cluster     connections and metadata (kcodec.client.net.cluster)
    group       membership, when there is a ``group_id``: the consumer protocol
                (consumer_group.py, KIP-848; the default) or classic (classic_group.py),
                which ``settle_protocol`` falls back to when the group's coordinator does
                not offer ConsumerGroupHeartbeat (a one-line notice on ``kcodec.client``)
    subs        the assignment and positions (positions.py)
    fetcher     fetch requests and the buffer of fetched blobs (fetcher.py)

The engine changes the assignment and seeks (dropping what the fetcher buffered for a
partition in the same step), looks up missing positions (committed offsets, else the
reset policy: ``reset_positions``, which the fetcher calls), and closes. The facades
(facade.py) run on it; its coroutines run on the client's loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.classic_group import ClassicGroupMember
from kcodec.client.consumer.fetcher import Fetcher
from kcodec.client.consumer.list_offsets import EARLIEST, LATEST, list_offsets
from kcodec.client.consumer.membership import GroupMember
from kcodec.client.consumer.positions import SubscriptionState
from kcodec.client.consumer.subscriptions import TopicWatch, compile_pattern, matching_topics
from kcodec.client.errors import NoOffsetForPartitionError
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError
from kcodec.protocol import ApiKey

__all__ = ["ConsumerEngine"]

log = logging.getLogger(__name__)


def _group_member(cluster: Cluster, config: ConsumerConfig) -> GroupMember:
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
        self.watch = TopicWatch(self)       # classic members: pattern and partition counts
        if self.cluster.metrics is not None:
            from kcodec.client.consumer.observe import statistics_part
            self.cluster.stats_parts["consumer"] = statistics_part(self)

    @property
    def closed(self) -> bool:
        return self.fetcher.closed

    def start(self) -> None:
        self.fetcher.start()

    async def settle_protocol(self) -> None:
        """Before the first join: keep the consumer protocol if the group's coordinator
        offers ConsumerGroupHeartbeat (KIP-848), else fall back to the classic protocol
        (Tansu, noida-db, brokers before Kafka 3.7), saying so once."""
        from kcodec.client.consumer.consumer_group import ConsumerGroupMember

        g = self.group
        if not isinstance(g, ConsumerGroupMember) or g.settled:
            return
        node = await g.coordinator_node()
        try:
            conn = await self.cluster.connection(node)
            versions = conn.core.broker_versions
        except KcodecError:
            return            # not reachable now: the join retries, and asks again
        g.settled = True
        if versions is None:
            return
        why = None
        if ApiKey.CONSUMER_GROUP_HEARTBEAT not in versions:
            why = "does not offer the consumer group protocol (KIP-848 ConsumerGroupHeartbeat)"
        else:
            try:     # the assignment names topics by id: Metadata v10+ must give them
                if conn.core.version(ApiKey.METADATA) < 10:
                    why = "gives no topic ids (Metadata v10+), which KIP-848 assignments use"
            except KcodecError:
                why = "does not answer Metadata"
        if why is not None:
            log.warning("group %r: the coordinator at %s:%s %s; using the classic protocol "
                        "(set group_protocol='classic' to choose it and silence this)",
                        g.group_id, conn.host, conn.port, why)
            classic = ClassicGroupMember(self.cluster, self.config, g.coordinator)
            classic.topics = g.topics
            self.group = classic

    @property
    def subscribed(self) -> bool:
        """Subscribed to topics, or to a pattern (which may match none yet)."""
        return bool(self.subs.subscription or self.subs.pattern_text)

    async def before_join(self) -> None:
        """The subscription a join carries: a pattern goes to a consumer-protocol
        coordinator as it is; a classic member matches it against the metadata now."""
        g, subs = self.group, self.subs
        if g is None:
            return
        g.regex = subs.pattern_text if not g.classic_watch else None
        if subs.pattern_text is not None and g.classic_watch:
            if subs.pattern is None:
                subs.pattern = compile_pattern(subs.pattern_text)
            await self.cluster.refresh(None, auto_create=False)
            subs.subscription = matching_topics(self.cluster, subs.pattern)
        elif subs.subscription:
            await self.cluster.refresh(subs.subscription, auto_create=False)

    async def after_join(self) -> None:
        if self.group is not None and self.group.classic_watch:
            self.watch.start()

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

    def pause(self, tps: list[TopicPartition]) -> None:
        """Stop fetching and returning ``tps``: their buffered records (and the answer of a
        Fetch in flight, by the new epoch) are dropped and the next fetch of each starts at
        its position, so ``poll`` returns nothing of them that a fetch brought in before
        the pause."""
        fetcher = self.fetcher
        with self.subs.lock:
            for tp in tps:
                st = self.subs.states[tp]
                st.paused = True
                if st.position is not None:
                    st.fetch_position = st.position
                    st.epoch = self.subs.next_epoch()
            paused = set(tps)
            fetcher.drop(lambda f: f.tp in paused)

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
        self.watch.stop()
        if self.group is not None and self.group.hb_task is not None:
            self.group.hb_task.cancel()
        await self.cluster.close()

    async def close(self) -> None:
        self.fetcher.stop()
        self.watch.stop()
        if self.group is not None:
            await self.group.leave()
        await self.cluster.close()
