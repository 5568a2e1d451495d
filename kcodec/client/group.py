"""Classic consumer-group membership: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
OffsetCommit/OffsetFetch and LeaveGroup, for one member.

The join/sync sequence runs when the consumer asks for it (from ``poll``), so rebalance
callbacks run in the caller's context; heartbeats run in a background task and only flag
that a rejoin is needed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

from kcodec.client.assignors import Assignment, Subscription, get_assignor
from kcodec.client.cluster import Cluster
from kcodec.client.config import ConsumerConfig
from kcodec.client.errors import (
    BrokerNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
)
from kcodec.errors import KcodecError, ProtocolError

__all__ = ["GroupMember", "TopicPartition"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


COORDINATOR_CODES = {14, 15, 16}   # load in progress, not available, not coordinator
REJOIN_CODES = {22, 25, 27, 79}     # illegal generation, unknown member, rebalancing, member id required


class GroupMember:
    """The group state of one consumer (member id, generation, coordinator, assignment)."""

    def __init__(self, cluster: Cluster, config: ConsumerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.group_id or ""
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = False
        self.leader_id = ""        # the leader's member id: JoinGroup tells every member
        self.coordinator: int | None = None
        self.topics: list[str] = []
        self.assignment: set[TopicPartition] = set()
        self.need_rejoin = True
        self.lost = False          # the membership ended under us: partitions are lost, not revoked
        self.last_poll = time.monotonic()
        self.hb_task: asyncio.Task | None = None
        self.last_error: BaseException | None = None
        self.assignors = [get_assignor(n) for n in config.assignors]

    # ------------------------------------------------------------------ coordinator
    async def coordinator_node(self) -> int:
        if self.coordinator is not None and self.coordinator in self.cluster.brokers:
            return self.coordinator

        async def find() -> int:
            r = await self.cluster.send(None, 10, {"key": self.group_id, "key_type": 0})
            b = r.body
            if b.error_code:
                raise KafkaError(b.error_code, f"FindCoordinator {self.group_id!r}")
            self.cluster.brokers.setdefault(b.node_id, (b.host, b.port))
            return b.node_id

        self.coordinator = await self.cluster.call(find, "FindCoordinator")
        return self.coordinator

    async def request(self, api_key: int, body: Any) -> Any:
        """A request to the coordinator; coordinator moves and disconnects are retried."""
        async def go() -> Any:
            node = await self.coordinator_node()
            try:
                r = await self.cluster.send(node, api_key, body)
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError):
                self.coordinator = None
                raise
            code = getattr(r.body, "error_code", 0)
            if code in COORDINATOR_CODES:
                self.coordinator = None
                raise KafkaError(code, "group coordinator")
            return r.body
        return await self.cluster.call(go, "group request")

    # ------------------------------------------------------------------ join / sync
    async def join(self, topics: list[str], owned: set[TopicPartition]) -> set[TopicPartition]:
        """Join (or rejoin) the group; returns the new assignment."""
        self.topics = sorted(topics)
        cfg = self.config
        deadline = time.monotonic() + max(cfg.api_timeout_ms, cfg.session_timeout_ms * 2) / 1000
        while True:
            owned_map: dict[str, list[int]] = {}
            for tp in owned:
                owned_map.setdefault(tp.topic, []).append(tp.partition)
            protocols = [{"name": a.name,
                          "metadata": a.subscription(self.topics, owned_map, self.generation).encode()}
                         for a in self.assignors]
            body = await self.request(11, {
                "group_id": self.group_id, "session_timeout_ms": cfg.session_timeout_ms,
                "rebalance_timeout_ms": cfg.max_poll_interval_ms, "member_id": self.member_id,
                "group_instance_id": cfg.group_instance_id, "protocol_type": "consumer",
                "protocols": protocols, "reason": None})
            if body.error_code == 79:          # MEMBER_ID_REQUIRED: rejoin with the given id
                self.member_id = body.member_id
                continue
            if body.error_code in (25, 22):
                self.member_id = ""
                self.generation = -1
                continue
            if body.error_code == 27 and time.monotonic() < deadline:
                continue
            if body.error_code:
                raise KafkaError(body.error_code, f"JoinGroup {self.group_id!r}")
            self.member_id = body.member_id
            self.generation = body.generation_id
            self.protocol = body.protocol_name
            self.leader = body.leader == body.member_id
            self.leader_id = body.leader
            assignments = []
            if self.leader and not body.skip_assignment:
                assignments = await self._assign(body)
            sbody = await self.request(14, {
                "group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": cfg.group_instance_id,
                "protocol_type": "consumer", "protocol_name": self.protocol,
                "assignments": assignments})
            if sbody.error_code in REJOIN_CODES:
                if sbody.error_code in (25, 22):
                    self.member_id = ""
                if time.monotonic() > deadline:
                    raise KafkaError(sbody.error_code, f"SyncGroup {self.group_id!r}")
                continue
            if sbody.error_code:
                raise KafkaError(sbody.error_code, f"SyncGroup {self.group_id!r}")
            a = Assignment.decode(sbody.assignment or b"")
            self.assignment = {TopicPartition(t, p) for t, ps in a.assigned_partitions.items() for p in ps}
            self.need_rejoin = False
            # A member that has just (re)joined gets a whole max_poll_interval_ms before it
            # counts as stalled (Java resets its poll timer inside the poll that rebalances).
            self.last_poll = time.monotonic()
            self._start_heartbeat()
            return self.assignment

    async def _assign(self, body: Any) -> list[dict]:
        assignor = next(a for a in self.assignors if a.name == body.protocol_name)
        subs = {m.member_id: Subscription.decode(m.metadata) for m in body.members}
        topics = sorted({t for s in subs.values() for t in s.topics})
        counts = {}
        await self.cluster.refresh(topics, auto_create=False)
        for t in topics:
            info = self.cluster.topics.get(t)
            if info is not None and info.error_code == 0:
                counts[t] = len(info.partitions)
        result = assignor.assign(counts, subs)
        return [{"member_id": m, "assignment": a.encode()} for m, a in result.items()]

    @property
    def cooperative(self) -> bool:
        return self.protocol == "cooperative-sticky"

    # ------------------------------------------------------------------ heartbeats
    def _start_heartbeat(self) -> None:
        if self.hb_task is None or self.hb_task.done():
            self.hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        max_poll = self.config.max_poll_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self.need_rejoin or self.generation < 0:
                continue
            if time.monotonic() - self.last_poll > max_poll:
                # the application stopped polling: give the partitions to someone who does
                self.need_rejoin = True
                self.lost = True
                await self.leave("max_poll_interval_ms exceeded", stop=False)
                continue
            try:
                node = await self.coordinator_node()
                r = await self.cluster.send(node, 12, {
                    "group_id": self.group_id, "generation_id": self.generation,
                    "member_id": self.member_id, "group_instance_id": self.config.group_instance_id},
                    timeout=max(interval * 2, 1.0))
                code = r.body.error_code
                if code in COORDINATOR_CODES:
                    self.coordinator = None
                elif code in (25, 22):   # fenced: another member may own our partitions now
                    self.member_id = "" if code == 25 else self.member_id
                    self.lost = True
                    self.need_rejoin = True
                elif code:
                    self.need_rejoin = True
            except asyncio.CancelledError:
                raise
            except KcodecError as exc:
                self.last_error = exc
                self.coordinator = None

    # ------------------------------------------------------------------ offsets
    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        topics: dict[str, list] = {}
        for tp, off in offsets.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": off,
                 "committed_leader_epoch": -1, "committed_metadata": ""})
        body = await self.request(8, {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": self.generation if self.generation >= 0 else -1,
            "member_id": self.member_id, "group_instance_id": self.config.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        for t in body.topics:
            for p in t.partitions:
                if p.error_code:
                    if p.error_code in REJOIN_CODES:
                        self.need_rejoin = True
                    raise KafkaError(p.error_code, f"OffsetCommit {t.name}[{p.partition_index}]")

    async def fetch_offsets(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, int]:
        """Committed offsets (-1: none) of ``tps`` (None: every partition the group has)."""
        topics = None
        if tps is not None:
            by: dict[str, list[int]] = {}
            for tp in tps:
                by.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by.items()]
        body = await self.request(9, {"group_id": self.group_id, "topics": topics,
                                      "require_stable": False})
        if body.error_code:
            raise KafkaError(body.error_code, f"OffsetFetch {self.group_id!r}")
        out = {}
        for t in body.topics:
            for p in t.partitions:
                if p.error_code and p.error_code != 3:
                    raise KafkaError(p.error_code, f"OffsetFetch {t.name}[{p.partition_index}]")
                out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
        return out

    async def leave(self, reason: str = "the consumer is closing", stop: bool = True) -> None:
        """LeaveGroup, so the group rebalances at once (``stop``: end the heartbeats too)."""
        if stop and self.hb_task is not None:
            self.hb_task.cancel()
        if not self.member_id or self.coordinator is None:
            return
        try:
            node = await self.coordinator_node()
            await self.cluster.send(node, 13, {
                "group_id": self.group_id, "member_id": self.member_id,
                "members": [{"member_id": self.member_id,
                             "group_instance_id": self.config.group_instance_id,
                             "reason": reason}]}, timeout=5)
        except KcodecError:
            pass
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
