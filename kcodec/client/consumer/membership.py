"""What every consumer-group membership has, whichever protocol it speaks.

    GroupMember   the group's coordinator (kcodec.client.coordinator) and commits
                  (commits.py), the member's id, subscription and assignment, whether it
                  must rejoin or lost its partitions, and its heartbeat task

Two protocols build on it: classic (classic_group.py: JoinGroup/SyncGroup, the leader
assigns) and consumer (consumer_group.py, KIP-848: ConsumerGroupHeartbeat, the broker
assigns). Each defines ``join``, ``leave``, its heartbeat loop, ``cooperative`` and the
identity its commits carry.

A member's commits reach the broker in the order they were made, whichever call made them
(``commit``, ``commit_async``, auto-commit, the rebalance callbacks): each waits for the one
before it. A commit is retried across a lost connection or a coordinator move, and a retry
sent after a later commit would move the offsets back (the broker keeps the last one it
applied); Java's and librdkafka's consumers keep the order by not retrying async commits,
which hands the application an error for a commit a retry would have made.
"""

from __future__ import annotations

import asyncio
import time

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.commits import Commits
from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import REJOIN_CODES, KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition

__all__ = ["GroupMember"]


class GroupMember:
    """One consumer's membership of its group (see the module docstring)."""

    # the client watches its topics between rebalances (subscriptions.TopicWatch): classic
    # members do; the consumer protocol's coordinator follows them itself
    classic_watch = True

    def __init__(self, cluster: Cluster, config: ConsumerConfig,
                 coordinator: Coordinator | None = None) -> None:
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.group_id or ""
        # (one already found is handed on when a member of one protocol gives way to the other)
        self.coordinator = coordinator or Coordinator(cluster, self.group_id)
        self.commits = Commits(self.coordinator, config.group_instance_id)
        self.member_id = ""
        self.topics: list[str] = []
        self.regex: str | None = None       # a pattern the broker matches (consumer protocol)
        self.assignment: set[TopicPartition] = set()
        self.need_rejoin = True
        self.lost = False       # the membership ended under us: partitions are lost, not revoked
        self.last_poll = time.monotonic()
        self.hb_task: asyncio.Task | None = None
        self.last_error: BaseException | None = None
        self._commit_order: asyncio.Lock | None = None    # made on the loop that commits

    # ------------------------------------------------------------------ the protocol's
    @property
    def cooperative(self) -> bool:
        """Whether a rebalance revokes only the partitions that move."""
        raise NotImplementedError

    @property
    def generation(self) -> int:
        """The generation (classic) or member epoch (consumer protocol); -1 or 0: none."""
        raise NotImplementedError

    def commit_identity(self) -> tuple[int, str]:
        """(generation or member epoch, member id) an OffsetCommit carries; (-1, ""): not
        a member (manual assignment), as Java sends it."""
        raise NotImplementedError

    async def join(self, topics: list[str], owned: set[TopicPartition]
                   ) -> set[TopicPartition] | None:
        """Join (or rejoin) for ``topics`` owning ``owned``; the partitions to own now, or
        None when the join found the membership gone (``lost`` set: say so, join again)."""
        raise NotImplementedError

    async def leave(self, reason: str = "the consumer is closing", stop: bool = True) -> None:
        """Leave the group at once (``stop``: end the heartbeats too)."""
        raise NotImplementedError

    async def _heartbeat_loop(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    async def coordinator_node(self) -> int:
        """The connection id of the group's coordinator (its own channel)."""
        return await self.coordinator.connection_id()

    def _start_heartbeat(self) -> None:
        if self.hb_task is None or self.hb_task.done():
            self.hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit ``offsets`` as this member; an error that says the membership is stale
        also flags a rejoin."""
        generation, member_id = self.commit_identity()
        if self._commit_order is None:
            self._commit_order = asyncio.Lock()     # fair: waiters go in the order they came
        try:
            async with self._commit_order:
                await self.commits.commit(offsets, generation, member_id)
        except KafkaError as exc:
            if exc.code in REJOIN_CODES:
                self.need_rejoin = True
            raise

    async def fetch_offsets(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, int]:
        """Committed offsets (-1: none) of ``tps`` (None: every partition the group has)."""
        return await self.commits.fetch(tps)
