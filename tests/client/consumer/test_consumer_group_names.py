"""A consumer-protocol assignment naming a topic id the metadata does not know yet is not
dropped: the coordinator sends an assignment once, so a member that dropped those
partitions reported it owned none of them and the coordinator, taking them as delivered,
sent them to nobody else -- seen in the group history matrix as a partition nobody
consumed for 120 s after a broker restart (a restarted broker answers a topic with an
error for a moment, so its id is not filed). Now the heartbeat after it is a full one,
answered with the whole assignment, and the names are looked up again."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.consumer_group import ConsumerGroupMember
from kcodec.client.errors import BrokerNotAvailableError
from kcodec.client.structs import TopicPartition
from kcodec.protocol import ConsumerGroupHeartbeatResponse as R

TID = uuid.uuid4()


class FakeCluster:
    def __init__(self) -> None:
        self.topic_names: dict[uuid.UUID, str] = {}
        self.topics: dict[str, Any] = {}
        self.refreshes = 0
        self.learn_after = 2          # the id is in the metadata from the 2nd refresh on
        self.fail_first = False       # the first refresh raises (a connection just lost)

    async def refresh(self, topics: Any, auto_create: bool = False) -> None:
        self.refreshes += 1
        if self.fail_first and self.refreshes == 1:
            raise BrokerNotAvailableError("connection to x:1 lost")
        if self.refreshes >= self.learn_after:
            self.topic_names[TID] = "t"


class FakeCoordinator:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def request(self, req: Any, timeout: float | None = None) -> Any:
        self.sent.append(req)
        full = req.subscribed_topic_names is not None
        # the coordinator sends the assignment on the first answer, and again only when
        # asked with a full heartbeat (as Kafka's and kcodec's coordinators do)
        give = len(self.sent) == 1 or full
        return R(error_code=0, member_id=req.member_id or "m", member_epoch=5,
                 heartbeat_interval_ms=500,
                 assignment=R.Assignment(topic_partitions=[R.TopicPartitions(
                     topic_id=TID, partitions=[1])]) if give else None)


def _member() -> tuple[ConsumerGroupMember, FakeCluster, FakeCoordinator]:
    cl, co = FakeCluster(), FakeCoordinator()
    m = ConsumerGroupMember(cl, ConsumerConfig(bootstrap_servers="x:1", group_id="g"))  # type: ignore[arg-type]
    m.coordinator = co  # type: ignore[assignment]
    m.topics = ["t"]
    return m, cl, co


def test_an_assignment_of_an_unknown_topic_id_is_asked_for_again() -> None:
    async def go() -> None:
        m, cl, co = _member()
        await m._heartbeat(set())                # join: the id is not known yet
        assert m.pending is None and m.full      # not taken as "nothing"
        await m._heartbeat(None)                 # the next one is full...
        assert co.sent[1].subscribed_topic_names == ["t"]
        assert m.pending == {TopicPartition("t", 1)} and m.need_rejoin   # ...and names it
        assert not m.full
    asyncio.run(go())


def test_a_known_topic_id_is_named_at_once() -> None:
    async def go() -> None:
        m, cl, co = _member()
        cl.topic_names[TID] = "t"
        await m._heartbeat(set())
        assert m.pending == {TopicPartition("t", 1)} and not m.full and cl.refreshes == 0
    asyncio.run(go())


def test_an_assignment_whose_names_refresh_raised_is_asked_for_again() -> None:
    """The metadata refresh that names an assignment's topic ids raised (right after a
    broker restart, its connection just lost): the heartbeat fails, and the next one is
    full, so the coordinator sends the assignment again. Before, the answer had already
    counted as taken and the partitions had nobody (120 s in the history matrix)."""
    async def go() -> None:
        m, cl, co = _member()
        cl.fail_first, cl.learn_after = True, 1
        try:
            await m._heartbeat(set())
        except BrokerNotAvailableError:
            pass
        else:
            raise AssertionError("the refresh's error was not raised")
        assert m.pending is None and m.full
        await m._heartbeat(None)
        assert co.sent[1].subscribed_topic_names == ["t"]       # a full heartbeat
        assert m.pending == {TopicPartition("t", 1)} and not m.full
    asyncio.run(go())
