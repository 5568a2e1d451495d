"""Group APIs by Kafka's rules: listing filters match case-insensitively, OffsetDelete on a
live group refuses only subscribed topics, generation -1 commits to a group without members
are accepted, and an Empty classic group keeps its protocol type."""

from __future__ import annotations

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import (
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ErrorCode,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kcodec.protocol.consumer import ConsumerProtocolSubscription, encode_versioned
from tests.support.broker_raw import Raw

E = ErrorCode


@pytest.fixture(scope="module")
def kb():
    with Cluster(1, num_partitions=1, initial_rebalance_delay_ms=0) as c:
        for t in ("sub", "other", "cg-sub", "cg-other"):
            c.create_topic(t, 1)
        yield c


def _join(raw: Raw, group: str, topics: list[str]) -> tuple[str, int]:
    J = JoinGroupRequest
    meta = encode_versioned(ConsumerProtocolSubscription(topics=topics), 0)
    r = raw.call(J(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                   member_id="", protocol_type="consumer",
                   protocols=[J.JoinGroupRequestProtocol(name="range", metadata=meta)]), 3)
    assert r.error_code == 0
    S = SyncGroupRequest
    s = raw.call(S(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                   assignments=[S.SyncGroupRequestAssignment(member_id=r.member_id,
                                                             assignment=b"")]), 3)
    assert s.error_code == 0
    return r.member_id, r.generation_id


def _commit(raw: Raw, group: str, topic: str, offset: int, generation: int = -1,
            member: str = "", version: int = 8) -> int:
    C = OffsetCommitRequest
    r = raw.call(C(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                   topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                       C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                      committed_metadata="")])]), version)
    return r.topics[0].partitions[0].error_code


def _committed(raw: Raw, group: str, topic: str) -> int:
    F = OffsetFetchRequest
    r = raw.call(F(group_id=group, topics=[F.OffsetFetchRequestTopic(
        name=topic, partition_indexes=[0])]), 5)
    return r.topics[0].partitions[0].committed_offset


def _delete(raw: Raw, group: str, topics: list[str]) -> tuple[int, dict]:
    D = OffsetDeleteRequest
    r = raw.call(D(group_id=group, topics=[D.OffsetDeleteRequestTopic(name=t, partitions=[
        D.OffsetDeleteRequestPartition(partition_index=0)]) for t in topics]), 0)
    return r.error_code, {t.name: t.partitions[0].error_code for t in r.topics}


def _list(raw: Raw, states: list[str] = (), types: list[str] = ()) -> dict:
    r = raw.call(ListGroupsRequest(states_filter=list(states), types_filter=list(types)), 5)
    assert r.error_code == 0
    return {g.group_id: (g.group_type, g.group_state, g.protocol_type) for g in r.groups}


def test_offset_delete_on_a_live_classic_group_refuses_only_subscribed_topics(kb):
    with Raw(kb.bootstrap) as raw:
        member, gen = _join(raw, "live", ["sub"])
        assert _commit(raw, "live", "sub", 5, gen, member) == 0
        assert _commit(raw, "live", "other", 7, gen, member) == 0
        assert _delete(raw, "live", ["sub", "other"]) == (
            0, {"sub": E.GROUP_SUBSCRIBED_TO_TOPIC, "other": 0})
        assert _committed(raw, "live", "sub") == 5
        assert _committed(raw, "live", "other") == -1
        assert _delete(raw, "nobody", ["sub"])[0] == E.GROUP_ID_NOT_FOUND


def test_offset_delete_on_a_live_consumer_protocol_group(kb):
    H = ConsumerGroupHeartbeatRequest
    with Raw(kb.bootstrap) as raw:
        r = raw.call(H(group_id="cg", member_id="m-1", member_epoch=0, rebalance_timeout_ms=30000,
                       subscribed_topic_names=["cg-sub"], topic_partitions=[]), 0)
        assert r.error_code == 0
        assert _commit(raw, "cg", "cg-sub", 3, r.member_epoch, r.member_id) == 0
        assert _commit(raw, "cg", "cg-other", 4) == E.UNKNOWN_MEMBER_ID
        # (an unassigned partition: committed as the admin client would, while empty)
        raw.call(H(group_id="cg", member_id=r.member_id, member_epoch=-1), 0)
        assert _commit(raw, "cg", "cg-other", 4) == 0
        r = raw.call(H(group_id="cg", member_id="m-2", member_epoch=0, rebalance_timeout_ms=30000,
                       subscribed_topic_names=["cg-sub"], topic_partitions=[]), 0)
        assert r.error_code == 0
        assert _delete(raw, "cg", ["cg-sub", "cg-other"]) == (
            0, {"cg-sub": E.GROUP_SUBSCRIBED_TO_TOPIC, "cg-other": 0})
        assert _committed(raw, "cg", "cg-sub") == 3
        assert _committed(raw, "cg", "cg-other") == -1
        raw.call(H(group_id="cg", member_id=r.member_id, member_epoch=-1), 0)


def test_generation_minus_one_commits_with_a_member_id_are_accepted_without_members(kb):
    # a consumer that assigns its partitions (never joins) commits with its own member id
    with Raw(kb.bootstrap) as raw:
        assert _commit(raw, "manual", "sub", 9, -1, "rdkafka-1234") == 0
        assert _commit(raw, "manual", "sub", 10, -1, "rdkafka-1234", version=9) == 0
        assert _committed(raw, "manual", "sub") == 10
        member, gen = _join(raw, "manual-live", ["sub"])
        # a group with members still wants its members' generation
        assert _commit(raw, "manual-live", "sub", 1, -1, "someone-else") == E.UNKNOWN_MEMBER_ID
        assert _commit(raw, "manual-live", "sub", 1, -1, "") == E.UNKNOWN_MEMBER_ID
        assert _commit(raw, "manual-live", "sub", 1, gen, member) == 0


def test_listing_filters_are_case_insensitive_and_empty_groups_keep_their_type(kb):
    L = LeaveGroupRequest
    H = ConsumerGroupHeartbeatRequest
    with Raw(kb.bootstrap) as raw:
        member, _ = _join(raw, "lister", ["sub"])
        r = raw.call(H(group_id="lister-848", member_id="m-9", member_epoch=0,
                       rebalance_timeout_ms=30000, subscribed_topic_names=["sub"],
                       topic_partitions=[]), 0)
        assert r.error_code == 0
        assert "lister" in _list(raw, types=["Classic"])
        assert "lister" not in _list(raw, types=["Consumer"])
        assert "lister-848" in _list(raw, types=["Consumer"])
        assert "lister-848" in _list(raw, types=["CONSUMER"], states=["stable"])
        assert _list(raw, states=["STABLE"])["lister"] == ("classic", "Stable", "consumer")
        assert "lister" not in _list(raw, states=["empty"])
        raw.call(L(group_id="lister", members=[L.MemberIdentity(member_id=member)]), 3)
        raw.call(H(group_id="lister-848", member_id=r.member_id, member_epoch=-1), 0)
        # an idle consumer group is still a consumer group, not a simple one
        assert _list(raw, states=["Empty"])["lister"] == ("classic", "Empty", "consumer")
        (d,) = raw.call(DescribeGroupsRequest(groups=["lister"]), 5).groups
        assert (d.group_state, d.protocol_type) == ("Empty", "consumer")


def test_an_empty_groups_protocol_type_survives_a_restart(tmp_path):
    with Cluster(1, data_dir=tmp_path, initial_rebalance_delay_ms=0) as c:
        c.create_topic("sub", 1)
        with Raw(c.bootstrap) as raw:
            member, gen = _join(raw, "kept", ["sub"])
            assert _commit(raw, "kept", "sub", 2, gen, member) == 0
            L = LeaveGroupRequest
            raw.call(L(group_id="kept", members=[L.MemberIdentity(member_id=member)]), 3)
    with Cluster(1, data_dir=tmp_path) as c, Raw(c.bootstrap) as raw:
        assert _list(raw)["kept"] == ("classic", "Empty", "consumer")


def test_delete_groups_deletes_an_empty_consumer_protocol_group(kb):
    # (before: GROUP_ID_NOT_FOUND when it had committed nothing, and never deleted)
    H = ConsumerGroupHeartbeatRequest

    def delete(raw: Raw, group: str) -> int:
        return raw.call(DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code

    with Raw(kb.bootstrap) as raw:
        for group, commit in (("del-848", False), ("del-848-offsets", True)):
            r = raw.call(H(group_id=group, member_id="m", member_epoch=0,
                           rebalance_timeout_ms=30000, subscribed_topic_names=["sub"],
                           topic_partitions=[]), 0)
            assert r.error_code == 0
            if commit:
                assert _commit(raw, group, "sub", 4, r.member_epoch, r.member_id) == 0
            assert delete(raw, group) == E.NON_EMPTY_GROUP
            raw.call(H(group_id=group, member_id=r.member_id, member_epoch=-1), 0)
            assert delete(raw, group) == 0
            assert group not in _list(raw)
            assert _committed(raw, group, "sub") == -1
            assert delete(raw, group) == E.GROUP_ID_NOT_FOUND


@pytest.mark.peers
def test_confluent_kafka_consumer_protocol_manual_assign_commits():
    """confluent-kafka with group.protocol=consumer that assigns its partitions commits
    with generation -1 and its member id: accepted, as Kafka does (was ILLEGAL_GENERATION)."""
    import time

    import confluent_kafka as ck

    with Cluster(1) as c:
        c.create_topic("t", 2)
        p = ck.Producer({"bootstrap.servers": c.bootstrap})
        for i in range(10):
            p.produce("t", b"x", partition=i % 2)
        p.flush()
        con = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "manual",
                           "group.protocol": "consumer", "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "log_level": 3})
        try:
            con.assign([ck.TopicPartition("t", 0, 0), ck.TopicPartition("t", 1, 0)])
            got = 0
            deadline = time.monotonic() + 20
            while got < 10 and time.monotonic() < deadline:
                m = con.poll(0.2)
                got += m is not None and m.error() is None
            assert got == 10
            done = con.commit(asynchronous=False)
            assert [(x.partition, x.offset, x.error) for x in done] == [(0, 5, None), (1, 5, None)]
        finally:
            con.close()
        assert c.offsets.committed("manual")[("t", 0)][0] == 5
