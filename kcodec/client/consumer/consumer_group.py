"""Consumer-protocol group membership (KIP-848, ``group_protocol="consumer"``).

The broker computes the assignment; the member only heartbeats (ConsumerGroupHeartbeat):
epoch 0 to join, its current epoch after that, -1 to leave. An assignment in a heartbeat
answer is the member's new set of partitions. The consumer applies it from ``poll`` as a
cooperative rebalance: partitions that left the set are committed and revoked first; the
next heartbeat reports what the member still owns, which lets the broker hand the revoked
partitions to their new owners. FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID mean the partitions
are lost; the member rejoins at epoch 0.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.membership import GroupMember
from kcodec.client.errors import COORDINATOR_CODES, FENCED_CODES, KafkaError
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError
from kcodec.observe.log import get_logger
from kcodec.protocol import ErrorCode

log = get_logger(__name__)

__all__ = ["ConsumerGroupMember"]



class ConsumerGroupMember(GroupMember):
    """The group state of one consumer under the consumer protocol."""

    classic_watch = False     # the coordinator follows topics and partition counts itself

    def __init__(self, cluster: Cluster, config: ConsumerConfig) -> None:
        super().__init__(cluster, config)
        self.member_id = uuid.uuid4().hex   # v1: the member chooses its id
        self.epoch = 0
        self.interval = config.heartbeat_interval_ms / 1000
        self.pending: set[TopicPartition] | None = None   # a new assignment not yet applied
        self.reported: set[TopicPartition] | None = None  # what the member owns, last sent
        self.sent_topics: list[str] | None = None
        self.regex = None                    # subscribe(pattern=...): matched by the broker
        self.sent_regex: str | None = None
        self.hb_lock = asyncio.Lock()
        self.settled = False     # the coordinator was seen to offer ConsumerGroupHeartbeat
        # the last heartbeat failed (timed out, connection lost, an error answer): its answer,
        # perhaps with a new assignment in it, may be lost, so the next one is a full request
        # (subscription and owned partitions), which the coordinator answers with the whole
        # assignment, as the Java client does
        self.full = False
        # what the member may still hold: the partitions it brought into the last join and
        # those that join gave it (the ones revoked are given up only after it returns), so
        # a full request never reports less than the member holds; reporting less would let
        # the coordinator hand a partition on while this member still processes it
        self.holding: set[TopicPartition] = set()
        self.joining = False

    @property
    def cooperative(self) -> bool:
        return True

    @property
    def generation(self) -> int:   # offset commits carry the member epoch
        return self.epoch

    @generation.setter
    def generation(self, value: int) -> None:
        self.epoch = max(value, 0)

    def commit_identity(self) -> tuple[int, str]:
        # a member only once the coordinator gave it an epoch; before (manual assignment,
        # or not joined yet) commits go out as a non-member's
        return (self.epoch, self.member_id) if self.epoch > 0 else (-1, "")

    async def _heartbeat(self, owned: set[TopicPartition] | None) -> Any:
        """One ConsumerGroupHeartbeat; full fields on join and after a failed one, else only
        what changed."""
        async with self.hb_lock:
            joining = self.epoch == 0
            full = joining or self.full
            changed = self.topics != self.sent_topics or self.regex != self.sent_regex
            # a pattern subscription (broker-side RE2/J matching) names no topics itself
            names = [] if self.regex else self.topics
            topics = names if full or changed else None
            regex = (self.regex or "") if topics is not None else None
            if joining:
                # a member (re)joining owns nothing in the group's eyes: what it held before
                # it was fenced is lost, and Kafka's coordinator wants the list empty here
                owned = set()
            elif full and owned is None:
                owned = set(self.holding)
            parts: dict[Any, list[int]] | None = None
            if owned is not None and (full or owned != self.reported):
                parts = {}
                for tp in owned:
                    info = self.cluster.topics.get(tp.topic)
                    if info is not None and info.topic_id is not None:
                        parts.setdefault(info.topic_id, []).append(tp.partition)
            self.full = True     # until an answer is taken whole (below)
            b = await self.coordinator.request(requests.consumer_group_heartbeat(
                self.group_id, self.member_id, self.epoch, self.config.group_instance_id,
                self.config.max_poll_interval_ms, topics, self.config.group_remote_assignor,
                parts, regex), timeout=max(self.interval * 2, 5.0))
            if b.error_code in FENCED_CODES:
                log.info("group %r: fenced (heartbeat says %s): the partitions are lost, "
                         "rejoining", self.group_id, ErrorCode(b.error_code).name)
                self.epoch = 0
                self.reported = None
                self.sent_topics = self.sent_regex = None
                self.lost = True
                self.need_rejoin = True
                raise KafkaError(b.error_code, f"ConsumerGroupHeartbeat {self.group_id!r}")
            if b.error_code:
                raise KafkaError(b.error_code, f"ConsumerGroupHeartbeat {self.group_id!r}",
                                 b.error_message)
            if topics is not None:
                self.sent_topics, self.sent_regex = self.topics, self.regex
            if parts is not None:
                self.reported = set(owned or ())
            self.member_id = b.member_id or self.member_id
            self.epoch = b.member_epoch
            if b.heartbeat_interval_ms > 0:
                self.interval = b.heartbeat_interval_ms / 1000
            if b.assignment is not None:
                pending = await self._names(b.assignment.topic_partitions)
                if pending is None:
                    # a topic id the metadata does not name yet (a broker just restarted
                    # answers a topic with an error for a moment): the coordinator sends an
                    # assignment once, so dropping those partitions would leave them with
                    # nobody; the next heartbeat is a full one, answered with the whole
                    # assignment, and names it again
                    return b     # (self.full stays True)
                self.pending = pending
                if self.pending != self.assignment:
                    self.need_rejoin = True
            # only now: an answer's assignment not taken (the names' metadata refresh
            # raised, the task was cancelled) leaves the next heartbeat a full one, which
            # the coordinator answers with the whole assignment; taken as delivered, the
            # coordinator would not send it again and those partitions would have nobody
            self.full = False
            return b

    async def _names(self, tps: Any) -> set[TopicPartition] | None:
        """The partitions of an assignment by topic name; None while a topic id in it is
        not in the metadata even after a refresh."""
        names = self.cluster.topic_names
        if any(tp.topic_id not in names for tp in tps):
            # a pattern's topics are known by id only: ask for every topic
            await self.cluster.refresh(None if self.regex else self.topics, auto_create=False)
            names = self.cluster.topic_names
            if any(tp.topic_id not in names for tp in tps):
                return None
        return {TopicPartition(names[tp.topic_id], p) for tp in tps for p in tp.partitions}

    async def join(self, topics: list[str], owned: set[TopicPartition]
                   ) -> set[TopicPartition] | None:
        """Join, or apply the newest assignment; returns the partitions to own now. None:
        the heartbeat said the member was fenced while it owned ``owned``: they are lost
        (``self.lost``), not revoked, and the caller joins again owning nothing."""
        self.topics = sorted(topics)
        deadline = time.monotonic() + max(self.config.api_timeout_ms, self.config.session_timeout_ms) / 1000
        self.joining = True
        try:
            while True:
                try:
                    await self._heartbeat(owned)
                    break
                except KafkaError as exc:
                    if exc.code in FENCED_CODES:
                        if owned:   # another member may own them now: lost, not revoked
                            return None
                        self.lost = False   # nothing was owned: nothing to say
                    elif exc.code not in COORDINATOR_CODES or time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
                except KcodecError:   # the coordinator's connection broke: find it again, retry
                    self.coordinator.forget()
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            self.joining = False
        if self.lost and owned:
            # a heartbeat sent before the join began was answered "fenced" meanwhile (the
            # join's own then rejoined at epoch 0): what the member owned may have been
            # another member's since, so it is lost, and the member joins again owning
            # nothing (it went on from its own positions, below another member's commits)
            return None
        new = self.pending if self.pending is not None else set(owned)
        self.holding = set(owned) | new
        self.pending = None
        self.assignment = new
        self.need_rejoin = False
        self.last_poll = time.monotonic()
        self._start_heartbeat()
        return new

    async def _heartbeat_loop(self) -> None:
        max_poll = self.config.max_poll_interval_ms / 1000
        while True:
            await asyncio.sleep(self.interval)
            if self.epoch <= 0:
                continue
            if time.monotonic() - self.last_poll > max_poll:
                self.need_rejoin = True
                self.lost = True
                await self.leave("max_poll_interval_ms exceeded", stop=False)
                continue
            try:
                # nothing new to report (a full request reports ``holding``); a join under way
                # heartbeats itself, with what the member owns at that step
                if not self.joining:
                    # what the member holds since its last join, once, if the coordinator
                    # has not heard it yet (the join's own heartbeat went out before the
                    # assignment it brought was taken): a coordinator waiting for the member
                    # to give partitions up learns it holds none of them
                    await self._heartbeat(set(self.holding)
                                          if self.holding != self.reported else None)
            except asyncio.CancelledError:
                raise
            except KcodecError as exc:
                self.last_error = exc
                self.coordinator.forget()

    async def leave(self, reason: str = "the consumer is closing", stop: bool = True) -> None:
        """A heartbeat at epoch -1: the broker reassigns the partitions at once."""
        if stop and self.hb_task is not None:
            self.hb_task.cancel()
        if self.epoch <= 0 or not self.coordinator.known:
            return
        try:
            # member epoch -1 leaves; -2 leaves for now, a static member
            await self.coordinator.request(requests.consumer_group_heartbeat(
                self.group_id, self.member_id, -2 if self.config.group_instance_id else -1,
                self.config.group_instance_id, -1, None, None, None), timeout=5)
        except KcodecError:
            pass
        self.epoch = 0
        self.reported = None
        self.sent_topics = self.sent_regex = None
