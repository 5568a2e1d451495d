"""Requests to the real broker (Tansu): kcodec encodes them, the broker answers, kcodec
decodes the answers. Versions are negotiated from the broker's ApiVersions response, so
each API runs at the highest version both sides support (older ones are tried too where
the layout changed)."""

from __future__ import annotations

import struct
import time

import crc32c
import pytest

from kcodec.protocol import (
    REQUESTS,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest,
    ErrorCode,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
    negotiate,
)
from kcodec.protocol.consumer import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_versioned,
    encode_versioned,
)
from kcodec.varint import encode_varint, encode_varlong
from tests.support.protocol_conn import Conn

pytestmark = pytest.mark.broker
OK = ErrorCode.NONE


@pytest.fixture(scope="module")
def conn(broker):
    with Conn(broker.bootstrap) as c:
        yield c


@pytest.fixture(scope="module")
def versions(conn):
    resp = conn.call(ApiVersionsRequest(client_software_name="kcodec", client_software_version="0"), 3)
    assert resp.error_code == OK
    return negotiate(resp)


def record_batch(value: bytes, key: bytes = b"k") -> bytes:
    """A one-record RecordBatch v2 (no compression), written by hand for these tests."""
    body = bytes([0]) + encode_varlong(0) + encode_varint(0)
    body += encode_varint(len(key)) + key + encode_varint(len(value)) + value + encode_varint(0)
    record = encode_varint(len(body)) + body
    ts = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + record
    crc = crc32c.crc32c(after_crc)
    batch = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(batch)) + batch


def test_api_versions_every_version(conn) -> None:
    for v in range(ApiVersionsRequest.MIN_VERSION, ApiVersionsRequest.MAX_VERSION + 1):
        resp = conn.call(ApiVersionsRequest(client_software_name="kcodec", client_software_version="0"), v)
        assert resp.error_code == OK
        keys = {k.api_key for k in resp.api_keys}
        assert {0, 1, 3, 18} <= keys


def test_metadata_every_version(conn, versions, broker) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    for v in range(1, versions[3] + 1):
        # before v4 auto-creation cannot be switched off: False there is refused on encode
        resp = conn.call(MetadataRequest(topics=[], allow_auto_topic_creation=v < 4), v)
        assert [b.port for b in resp.brokers] == [port], v


def create_topic(conn, versions, name: str, partitions: int = 2) -> None:
    T = CreateTopicsRequest
    resp = conn.call(T(topics=[T.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                       timeout_ms=5000), versions[19])
    assert [(t.name, t.error_code) for t in resp.topics] == [(name, OK)]


def topic_metadata(conn, versions, name: str):
    M = MetadataRequest
    resp = conn.call(M(topics=[M.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), versions[3])
    (topic,) = resp.topics
    assert topic.error_code == OK and topic.name == name
    return topic


def test_create_produce_fetch_list_offsets(conn, versions, topic_name) -> None:
    create_topic(conn, versions, topic_name, partitions=2)
    topic = topic_metadata(conn, versions, topic_name)
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1]

    P = ProduceRequest
    value = b"hello from kcodec " + topic_name.encode()
    req = P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic_name, topic_id=topic.topic_id,
        partition_data=[P.PartitionProduceData(index=1, records=record_batch(value))])])
    resp = conn.call(req, versions[0])
    (pr,) = resp.responses[0].partition_responses
    assert (pr.index, pr.error_code, pr.base_offset) == (1, OK, 0)

    F = FetchRequest
    fetch = F(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=[F.FetchTopic(
        topic=topic_name, topic_id=topic.topic_id,
        partitions=[F.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])])
    resp = conn.call(fetch, versions[1])
    assert resp.error_code == OK
    (part,) = resp.responses[0].partitions
    assert part.error_code == OK and part.high_watermark == 1
    assert value in bytes(part.records)

    L = ListOffsetsRequest
    for ts, expected in ((-2, 0), (-1, 1)):
        resp = conn.call(L(replica_id=-1, topics=[L.ListOffsetsTopic(
            name=topic_name, partitions=[L.ListOffsetsPartition(partition_index=1, timestamp=ts)])]),
            versions[2])
        (lp,) = resp.topics[0].partitions
        assert (lp.error_code, lp.offset) == (OK, expected)

    resp = conn.call(DeleteTopicsRequest(topic_names=[topic_name], topics=[
        DeleteTopicsRequest.DeleteTopicState(name=topic_name)], timeout_ms=5000), versions[20])
    assert [r.error_code for r in resp.responses] == [OK]


def test_fetch_and_produce_at_older_versions(conn, versions, topic_name) -> None:
    create_topic(conn, versions, topic_name, partitions=1)
    P, F = ProduceRequest, FetchRequest
    for v in (3, 7, 9):
        req = P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name=topic_name, partition_data=[P.PartitionProduceData(index=0, records=record_batch(b"v%d" % v))])])
        pr = conn.call(req, v).responses[0].partition_responses[0]
        assert pr.error_code == OK
    for v in (4, 11, 12):
        resp = conn.call(F(max_wait_ms=50, min_bytes=1, topics=[F.FetchTopic(topic=topic_name, partitions=[
            F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), v)
        part = resp.responses[0].partitions[0]
        assert part.error_code == OK and part.high_watermark == 3
        assert b"v3" in bytes(part.records)


def test_consumer_group_apis(conn, versions, topic_name) -> None:
    create_topic(conn, versions, topic_name, partitions=2)
    group = "g-" + topic_name
    v = versions[10]
    fc = conn.call(FindCoordinatorRequest(key=group if v < 4 else "", coordinator_keys=[group] if v >= 4 else []), v)
    coord = fc.coordinators[0] if versions[10] >= 4 else fc
    assert coord.error_code == OK and coord.port > 0

    J = JoinGroupRequest
    subscription = encode_versioned(ConsumerProtocolSubscription(topics=[topic_name]), 1)
    join = J(group_id=group, session_timeout_ms=2000, rebalance_timeout_ms=2000, member_id="",
             protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=subscription)])
    resp = conn.call(join, versions[11])
    if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        join.member_id = resp.member_id
        resp = conn.call(join, versions[11])
    assert resp.error_code == OK
    member, generation = resp.member_id, resp.generation_id
    assert resp.leader == member
    assert [decode_versioned(ConsumerProtocolSubscription, m.metadata)[1].topics for m in resp.members] == [[topic_name]]

    A = ConsumerProtocolAssignment
    assignment = A(assigned_partitions=[A.TopicPartition(topic=topic_name, partitions=[0, 1])])
    S = SyncGroupRequest
    resp = conn.call(S(group_id=group, generation_id=generation, member_id=member, protocol_type="consumer",
                       protocol_name="range", assignments=[S.SyncGroupRequestAssignment(
                           member_id=member, assignment=encode_versioned(assignment, 1))]), versions[14])
    assert resp.error_code == OK
    assert decode_versioned(A, resp.assignment) == (1, assignment)

    hb = conn.call(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member), versions[12])
    assert hb.error_code == OK

    C = OffsetCommitRequest
    resp = conn.call(C(group_id=group, generation_id_or_member_epoch=generation, member_id=member, topics=[
        C.OffsetCommitRequestTopic(name=topic_name, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=42, committed_metadata="")])]),
        versions[8])
    assert [p.error_code for p in resp.topics[0].partitions] == [OK]

    OF = OffsetFetchRequest
    if versions[9] >= 8:
        req = OF(groups=[OF.OffsetFetchRequestGroup(group_id=group, member_id=member, topics=[
            OF.OffsetFetchRequestTopics(name=topic_name, partition_indexes=[0])])])
    else:
        req = OF(group_id=group, topics=[OF.OffsetFetchRequestTopic(name=topic_name, partition_indexes=[0])])
    resp = conn.call(req, versions[9])
    topics = resp.groups[0].topics if versions[9] >= 8 else resp.topics
    assert [(p.partition_index, p.committed_offset) for p in topics[0].partitions] == [(0, 42)]

    dg = conn.call(DescribeGroupsRequest(groups=[group]), versions[15])
    assert dg.groups[0].error_code == OK and [m.member_id for m in dg.groups[0].members] == [member]
    lg = conn.call(ListGroupsRequest(), versions[16])
    assert group in [g.group_id for g in lg.groups]

    L = LeaveGroupRequest
    v = versions[13]
    leave = L(group_id=group, member_id=member) if v < 3 else L(group_id=group, members=[L.MemberIdentity(member_id=member)])
    resp = conn.call(leave, v)
    assert resp.error_code == OK


def test_every_negotiated_api_is_declared(versions) -> None:
    assert set(versions) <= set(REQUESTS)
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20} <= set(versions)
