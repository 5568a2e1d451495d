"""Classic consumer-group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, for
one member (its coordinator and commits: membership.py).

The join/sync sequence runs when the consumer asks for it (from ``poll``), so rebalance
callbacks run in the caller's context; heartbeats run in a background task and only flag
that a rejoin is needed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypeVar

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.assignors import Assignment, Subscription, get_assignor
from kcodec.client.consumer.membership import GroupMember
from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import (
    FENCED_CODES,
    REJOIN_CODES,
    KafkaError,
)
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError
from kcodec.observe.log import get_logger
from kcodec.protocol import ErrorCode, Request, Response

R = TypeVar("R", bound=Response)

log = get_logger(__name__)

__all__ = ["ClassicGroupMember"]


class ClassicGroupMember(GroupMember):
    """The group state of one consumer (member id, generation, coordinator, assignment)."""

    def __init__(self, cluster: Cluster, config: ConsumerConfig,
                 coordinator: Coordinator | None = None) -> None:
        super().__init__(cluster, config, coordinator)
        self._generation = -1
        self.protocol: str | None = None
        self.leader = False
        self.leader_id = ""        # the leader's member id: JoinGroup tells every member
        self.assignors = [get_assignor(n) for n in config.assignors]
        self.joined_counts: dict[str, int] = {}   # leader: the partition counts it assigned

    @property
    def generation(self) -> int:
        return self._generation

    @generation.setter
    def generation(self, value: int) -> None:
        self._generation = value

    def commit_identity(self) -> tuple[int, str]:
        return (self.generation if self.generation >= 0 else -1), self.member_id

    async def request(self, req: Request[R]) -> R:
        """A request to the coordinator, retried across its moves and lost connections."""
        return await self.coordinator.call(req, "group request")

    # ------------------------------------------------------------------ join / sync
    async def join(self, topics: list[str], owned: set[TopicPartition]
                   ) -> set[TopicPartition] | None:
        """Join (or rejoin) the group; returns the new assignment. None: JoinGroup or
        SyncGroup said the membership is gone (fenced) while the member owned ``owned``:
        those partitions are lost (``self.lost``; another member may own them and have
        committed past this one), so the caller says so and joins again owning nothing,
        as Java's consumer does (its partitions lost, not claimed at the next join, nor
        revoked into a commit the new generation would accept)."""
        self.topics = sorted(topics)
        cfg = self.config
        deadline = time.monotonic() + max(cfg.api_timeout_ms, cfg.session_timeout_ms * 2) / 1000
        while True:
            owned_map: dict[str, list[int]] = {}
            for tp in owned:
                owned_map.setdefault(tp.topic, []).append(tp.partition)
            protocols = [(a.name, a.subscription(self.topics, owned_map, self.generation).encode())
                         for a in self.assignors]
            body = await self.request(requests.join_group(
                self.group_id, self.member_id, cfg.group_instance_id, cfg.session_timeout_ms,
                cfg.max_poll_interval_ms, protocols))
            if body.error_code == ErrorCode.MEMBER_ID_REQUIRED:   # rejoin with the given id
                self.member_id = body.member_id
                continue
            if body.error_code in FENCED_CODES:
                log.info("group %r: JoinGroup says %s: joining again as a new member",
                         self.group_id, ErrorCode(body.error_code).name)
                self.member_id = ""
                self.generation = -1
                if owned:
                    self.lost = True
                    return None
                continue
            if body.error_code == ErrorCode.REBALANCE_IN_PROGRESS and time.monotonic() < deadline:
                continue
            if body.error_code == ErrorCode.INVALID_SESSION_TIMEOUT:   # a setting, not a retry
                raise KafkaError(body.error_code, f"JoinGroup {self.group_id!r}", (
                    f"session_timeout_ms={cfg.session_timeout_ms} is outside the range the "
                    f"broker allows (its group.min.session.timeout.ms and "
                    f"group.max.session.timeout.ms, 6000 and 1800000 by default): set "
                    f"session_timeout_ms within it"))
            if body.error_code:
                raise KafkaError(body.error_code, f"JoinGroup {self.group_id!r}")
            self.member_id = body.member_id
            self.generation = body.generation_id
            self.protocol = body.protocol_name
            self.leader = body.leader == body.member_id
            self.leader_id = body.leader
            self.joined_counts = {}
            assignments = []
            if self.leader and not body.skip_assignment:
                assignments = await self._assign(body)
            sbody = await self.request(requests.sync_group(
                self.group_id, self.generation, self.member_id, cfg.group_instance_id,
                self.protocol, assignments))
            if sbody.error_code in REJOIN_CODES:
                if sbody.error_code in FENCED_CODES:
                    self.member_id = ""
                    if owned:
                        self.generation = -1
                        self.lost = True
                        return None
                if time.monotonic() > deadline:
                    raise KafkaError(sbody.error_code, f"SyncGroup {self.group_id!r}")
                continue
            if sbody.error_code:
                raise KafkaError(sbody.error_code, f"SyncGroup {self.group_id!r}")
            a = Assignment.decode(sbody.assignment or b"")
            self.assignment = {TopicPartition(t, p) for t, ps in a.assigned_partitions.items() for p in ps}
            for assignor in self.assignors:     # sticky: what to claim at the next join
                if assignor.name == self.protocol and hasattr(assignor, "on_assignment"):
                    assignor.on_assignment(a.assigned_partitions, self.generation)
            self.need_rejoin = False
            # A member that has just (re)joined gets a whole max_poll_interval_ms before it
            # counts as stalled (Java resets its poll timer inside the poll that rebalances).
            self.last_poll = time.monotonic()
            self._start_heartbeat()
            return self.assignment

    async def _assign(self, body: Any) -> list[tuple[str, bytes]]:
        assignor = next(a for a in self.assignors if a.name == body.protocol_name)
        subs = {m.member_id: Subscription.decode(m.metadata) for m in body.members}
        topics = sorted({t for s in subs.values() for t in s.topics})
        counts = {}
        await self.cluster.refresh(topics, auto_create=False)
        for t in topics:
            info = self.cluster.topics.get(t)
            if info is not None and info.error_code == ErrorCode.NONE:
                counts[t] = len(info.partitions)
        result = assignor.assign(counts, subs)
        self.joined_counts = dict(counts)
        return [(m, a.encode()) for m, a in result.items()]

    @property
    def cooperative(self) -> bool:
        return self.protocol == "cooperative-sticky"

    # ------------------------------------------------------------------ heartbeats
    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        max_poll = self.config.max_poll_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self.need_rejoin or self.generation < 0:
                continue
            if time.monotonic() - self.last_poll > max_poll:
                # the application stopped polling: give the partitions to someone who does
                log.warning("group %r: no poll for %.1f s (max_poll_interval_ms %d): leaving "
                            "the group, the partitions go to other members; poll more often "
                            "or raise max_poll_interval_ms", self.group_id,
                            time.monotonic() - self.last_poll, self.config.max_poll_interval_ms)
                self.need_rejoin = True
                self.lost = True
                await self.leave("max_poll_interval_ms exceeded", stop=False)
                continue
            try:
                hb = await self.coordinator.request(requests.heartbeat(
                    self.group_id, self.generation, self.member_id,
                    self.config.group_instance_id), timeout=max(interval * 2, 1.0))
                code = hb.error_code
                if code in FENCED_CODES:   # another member may own our partitions now
                    log.info("group %r: fenced (heartbeat says %s): the partitions are lost, "
                             "rejoining", self.group_id, ErrorCode(code).name)
                    if code == ErrorCode.UNKNOWN_MEMBER_ID:
                        self.member_id = ""
                    self.lost = True
                    self.need_rejoin = True
                elif code:
                    if self.cluster.debug.consumer:
                        log.debug("group %r: heartbeat says %s: rejoining", self.group_id,
                                  ErrorCode(code).name)
                    self.need_rejoin = True
            except asyncio.CancelledError:
                raise
            except KcodecError as exc:    # (a moved coordinator is forgotten already)
                self.last_error = exc
                self.coordinator.forget()

    async def leave(self, reason: str = "the consumer is closing", stop: bool = True) -> None:
        """LeaveGroup, so the group rebalances at once (``stop``: end the heartbeats too)."""
        if stop and self.hb_task is not None:
            self.hb_task.cancel()
        if not self.member_id or not self.coordinator.known:
            return
        try:
            await self.coordinator.request(requests.leave_group(
                self.group_id, self.member_id, self.config.group_instance_id, reason),
                timeout=5)
        except KcodecError:
            pass
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""

