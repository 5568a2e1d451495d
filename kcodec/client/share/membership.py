"""Share-group membership: ShareGroupHeartbeat to the group coordinator (KIP-932).

The member makes up its id (KIP-1082), joins at epoch 0 with its subscription, then
heartbeats at the epoch it was given, at the interval the coordinator asks for. An
assignment in an answer is the member's new set of partitions; several members of a share
group may hold the same partition (the share-partition leader hands each record to one of
them), so there is nothing to revoke. FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: the member
joins again at epoch 0. Leaving is epoch -1.

A member whose application has not polled for ``max_poll_interval_ms`` leaves (its
acquired records go back to the others) and stops heartbeating; the next poll joins it
again at epoch 0, with the same member id.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import (
    COORDINATOR_CODES,
    FENCED_CODES,
    KafkaError,
)
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError
from kcodec.protocol import ShareGroupHeartbeatRequest

__all__ = ["ShareGroupMember"]

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1


def new_member_id() -> str:
    """A random member id, as Java's Uuid prints it (22 characters of URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareGroupMember:
    def __init__(self, cluster: Cluster, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.member_id = new_member_id()
        self.epoch = 0
        self.interval = 5.0
        self.topics: list[str] = []
        self.sent_topics: list[str] | None = None
        self.assignment: set[TopicPartition] = set()
        # heartbeats go on the broker's connection, the acknowledgements' one: the leave
        # then follows the last acknowledgement sent before it
        self.coordinator = Coordinator(cluster, group_id, own_connection=False)
        self.task: asyncio.Task | None = None
        self.last_error: BaseException | None = None
        self.changed = asyncio.Event()          # a new assignment arrived
        self._lock = asyncio.Lock()
        # seconds since the application last polled, and what to do on leaving for it
        self.since_poll: Callable[[], float] = lambda: 0.0
        self.max_poll_interval = float("inf")
        self.on_stale: Callable[[], None] = lambda: None
        self.stale = False                      # left for want of polls; a poll rejoins

    async def heartbeat(self) -> None:
        """One ShareGroupHeartbeat: the full subscription on join or when it changed."""
        async with self._lock:
            joining = self.epoch == 0
            topics = self.topics if joining or self.topics != self.sent_topics else None
            b = await self.coordinator.request(ShareGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=self.epoch,
                rack_id=None, subscribed_topic_names=topics),
                timeout=max(self.interval * 2, 5.0))
            if b.error_code in FENCED_CODES:
                self.epoch = 0
                self.sent_topics = None
                raise KafkaError(b.error_code, f"ShareGroupHeartbeat {self.group_id!r}",
                                 b.error_message)
            if b.error_code:
                raise KafkaError(b.error_code, f"ShareGroupHeartbeat {self.group_id!r}",
                                 b.error_message)
            if topics is not None:
                self.sent_topics = topics
            self.epoch = b.member_epoch
            if b.heartbeat_interval_ms > 0:
                self.interval = b.heartbeat_interval_ms / 1000
            if b.assignment is not None:
                self.assignment = await self._names(b.assignment.topic_partitions)
                self.changed.set()

    async def _names(self, tps: Any) -> set[TopicPartition]:
        names = self.cluster.topic_names
        if any(tp.topic_id not in names for tp in tps):
            await self.cluster.refresh(self.topics, auto_create=False)
        return {TopicPartition(names[tp.topic_id], p) for tp in tps if tp.topic_id in names
                for p in tp.partitions}

    async def join(self, topics: list[str], timeout: float) -> None:
        """Join (or change the subscription) and start heartbeating."""
        self.topics = sorted(topics)
        self.stale = False
        deadline = time.monotonic() + timeout
        await self.cluster.refresh(self.topics, auto_create=False)
        while True:
            try:
                await self.heartbeat()
                break
            except KafkaError as exc:
                if exc.code not in COORDINATOR_CODES | FENCED_CODES or time.monotonic() > deadline:
                    raise
            except KcodecError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        beat_at = time.monotonic() + self.interval
        while True:
            now = time.monotonic()
            # awake when the heartbeat is due, or when max_poll_interval_ms runs out if
            # that is sooner: a member not polled leaves on time, not at the next beat
            wake = now + 0.1 if self.stale else \
                min(beat_at, now + self.max_poll_interval - self.since_poll() + 0.01)
            await asyncio.sleep(max(0.0, wake - now))
            idle = self.since_poll()
            if idle > self.max_poll_interval:
                if not self.stale:
                    await self._leave_stale(idle)
                continue
            if self.stale:
                self.stale = False
                log.info("share group %r: polled again: joining again", self.group_id)
            elif time.monotonic() < beat_at:
                continue
            beat_at = time.monotonic() + self.interval
            try:
                await self.heartbeat()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                self.last_error = exc
                if exc.code in FENCED_CODES:
                    self.assignment = set()
                    self.changed.set()
            except KcodecError as exc:
                self.last_error = exc

    async def _leave_stale(self, idle: float) -> None:
        log.warning("share group %r: poll() was not called for %.1f s, more than "
                    "max_poll_interval_ms (%d ms): this member leaves the group and the "
                    "records it acquired go back to the other members; the next poll joins "
                    "again. Poll more often, or raise max_poll_interval_ms",
                    self.group_id, idle, self.max_poll_interval * 1000)
        self.stale = True
        self.assignment = set()          # no fetch starts after the leave is sent
        self.changed.set()
        await self._send_leave()
        self.on_stale()

    async def _send_leave(self) -> None:
        if self.epoch <= 0 or not self.coordinator.known:
            self.epoch = 0
            return
        async with self._lock:
            try:
                await self.coordinator.request(ShareGroupHeartbeatRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH),
                    timeout=5)
            except KcodecError:
                pass
            self.epoch = 0
            self.sent_topics = None

    async def leave(self) -> None:
        """Epoch -1: the coordinator reassigns at once; held records go back."""
        if self.task is not None:
            self.task.cancel()
            self.task = None
        await self._send_leave()
        self.assignment = set()
