"""A group's committed offsets: OffsetCommit and OffsetFetch through its coordinator
(Java's ``CommitRequestManager``), for any group membership and for standalone commits.

    Commits.commit   offsets as a member (generation or member epoch, member id) or, with
                     (-1, ""), as a non-member: a partition's error raises ``KafkaError``
                     (``commit_each``: each partition's error code)
    Commits.fetch    the committed offset of each partition (-1: none)

What a consumer commits and when (auto-commit, ``commit()``, the rebalance callbacks) is
the facade's and the membership's; this room only carries the requests. Requests are
retried across coordinator moves and lost connections (``Coordinator.call``).
"""

from __future__ import annotations

import time

from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import COORDINATOR_CODES, KafkaError
from kcodec.client.net import requests
from kcodec.client.structs import TopicPartition
from kcodec.observe.log import get_logger
from kcodec.protocol import ErrorCode, OffsetCommitResponse

log = get_logger(__name__)

__all__ = ["Commits"]


class Commits:
    """OffsetCommit and OffsetFetch of one group (see the module docstring)."""

    def __init__(self, coordinator: Coordinator, group_instance_id: str | None = None) -> None:
        self.coordinator = coordinator
        self.group_instance_id = group_instance_id     # a static member's commits carry it
        self.group_id = coordinator.key

    async def commit(self, offsets: dict[TopicPartition, int], generation: int = -1,
                     member_id: str = "") -> None:
        """Commit ``offsets`` (each the offset of the next record to read) under this
        identity; a partition's error raises ``KafkaError`` (the first one)."""
        for tp, code in (await self.commit_each(offsets, generation, member_id)).items():
            if code:
                raise KafkaError(code, f"OffsetCommit {tp.topic}[{tp.partition}]")

    async def commit_each(self, offsets: dict[TopicPartition, int], generation: int = -1,
                          member_id: str = "") -> dict[TopicPartition, int]:
        """``commit``, with each partition's error code (0: committed) instead of raising."""
        if not offsets:
            return {}
        cluster = self.coordinator.cluster
        req = requests.offset_commit(
            self.group_id, generation, member_id, self.group_instance_id,
            [(tp.topic, tp.partition, off) for tp, off in offsets.items()])

        async def once() -> OffsetCommitResponse:
            body = await self.coordinator.request(req)
            # OffsetCommit answers a coordinator move per partition: find it, send again
            moved = next((p.error_code for t in body.topics for p in t.partitions
                          if p.error_code in COORDINATOR_CODES), None)
            if moved is not None:
                self.coordinator.forget()
                raise KafkaError(moved, f"OffsetCommit {self.group_id!r}")
            return body
        t0 = time.monotonic()
        body = await cluster.call(once, "OffsetCommit")
        ms = (time.monotonic() - t0) * 1000
        cm = cluster.metrics
        if cm is not None and cm.kind == "consumer":    # (an admin client's have no commits)
            cm.commits.value += 1
            cm.commit_latency.record(ms)
        if cluster.debug.consumer:
            log.debug("group %r: committed %d offsets in %.1f ms", self.group_id, len(offsets),
                      ms)
        return {TopicPartition(t.name, p.partition_index): p.error_code
                for t in body.topics for p in t.partitions}

    async def fetch(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, int]:
        """Committed offsets (-1: none) of ``tps`` (None: every partition the group has)."""
        by: dict[str, list[int]] | None = None
        if tps is not None:
            by = {}
            for tp in tps:
                by.setdefault(tp.topic, []).append(tp.partition)
        body = await self.coordinator.call(requests.offset_fetch(self.group_id, by),
                                           "OffsetFetch")
        if body.error_code:
            raise KafkaError(body.error_code, f"OffsetFetch {self.group_id!r}")
        out = {}
        for t in body.topics:
            for p in t.partitions:
                if p.error_code and p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise KafkaError(p.error_code, f"OffsetFetch {t.name}[{p.partition_index}]")
                out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
        return out
