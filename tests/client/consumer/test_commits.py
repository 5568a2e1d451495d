"""Commits: OffsetCommit answers a coordinator move per partition; the commit then finds
the coordinator again and is sent again, instead of failing to the application (the next
commit would have gone to the same wrong broker). A member's commits are applied in the
order it made them, a retried one included."""

from __future__ import annotations

import asyncio
from typing import Any

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.commits import Commits
from kcodec.client.consumer.membership import GroupMember
from kcodec.client.errors import BrokerNotAvailableError
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition
from kcodec.protocol import ErrorCode, OffsetCommitResponse

T, P = OffsetCommitResponse.OffsetCommitResponseTopic, OffsetCommitResponse.OffsetCommitResponsePartition


class _Coordinator:
    key = "g"

    def __init__(self, cluster: Cluster, codes: list[int]) -> None:
        self.cluster = cluster
        self.codes = codes
        self.forgotten = 0
        self.sent: list[Any] = []

    def forget(self) -> None:
        self.forgotten += 1

    async def request(self, req: Any) -> OffsetCommitResponse:
        self.sent.append(req)
        code = self.codes.pop(0)
        return OffsetCommitResponse(topics=[T(name="t", partitions=[
            P(partition_index=0, error_code=code), P(partition_index=1, error_code=0)])])


def test_a_partition_level_coordinator_move_is_found_again_and_sent_again() -> None:
    cluster = Cluster(ConsumerConfig(bootstrap_servers="127.0.0.1:1", retry_backoff_ms=1))
    coord = _Coordinator(cluster, [ErrorCode.NOT_COORDINATOR, ErrorCode.NONE])
    commits = Commits(coord)  # type: ignore[arg-type]
    asyncio.run(commits.commit({TopicPartition("t", 0): 5, TopicPartition("t", 1): 6}, 3, "m"))
    assert coord.forgotten == 1 and len(coord.sent) == 2
    req = coord.sent[0]
    assert (req.generation_id_or_member_epoch, req.member_id) == (3, "m")


def test_another_partition_error_is_each_partitions_own() -> None:
    cluster = Cluster(ConsumerConfig(bootstrap_servers="127.0.0.1:1", retry_backoff_ms=1))
    coord = _Coordinator(cluster, [ErrorCode.OFFSET_METADATA_TOO_LARGE])
    codes = asyncio.run(Commits(coord).commit_each(  # type: ignore[arg-type]
        {TopicPartition("t", 0): 5, TopicPartition("t", 1): 6}))
    assert codes == {TopicPartition("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE,
                     TopicPartition("t", 1): 0}
    assert coord.forgotten == 0


class _LosesTheFirst:
    """A coordinator whose connection is lost under the first commit sent (the broker
    never saw it); what the broker applied, in order."""
    key = "g"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.applied: list[int] = []
        self.calls = 0

    def forget(self) -> None:
        pass

    async def request(self, req: Any) -> OffsetCommitResponse:
        self.calls += 1
        offset = req.topics[0].partitions[0].committed_offset
        if self.calls == 1:
            await asyncio.sleep(0.02)
            raise BrokerNotAvailableError("the connection to the coordinator was lost")
        self.applied.append(offset)
        return OffsetCommitResponse(topics=[T(name="t", partitions=[
            P(partition_index=0, error_code=0)])])


class _Member(GroupMember):
    def commit_identity(self) -> tuple[int, str]:
        return 3, "m"


def test_a_retried_commit_is_applied_before_a_later_one() -> None:
    # two async commits in flight; the first is lost with its connection and sent again:
    # the broker must apply it before the second, or the committed offset goes back
    config = ConsumerConfig(bootstrap_servers="127.0.0.1:1", group_id="g", retry_backoff_ms=5)
    cluster = Cluster(config)
    coord = _LosesTheFirst(cluster)
    member = _Member(cluster, config, coord)  # type: ignore[arg-type]

    async def go() -> None:
        first = asyncio.ensure_future(member.commit({TopicPartition("t", 0): 5}))
        await asyncio.sleep(0)          # the first is sent before the second is made
        second = asyncio.ensure_future(member.commit({TopicPartition("t", 0): 6}))
        await asyncio.gather(first, second)
    asyncio.run(go())
    assert coord.applied == [5, 6]
