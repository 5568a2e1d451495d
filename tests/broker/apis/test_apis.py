"""The kcodec broker's APIs, spoken to directly (raw requests) and through kcodec's client."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import (
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    ErrorCode,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from kcodec.records import RecordBatchBuilder, iter_batches
from tests.support.broker_raw import Raw

E = ErrorCode


@pytest.fixture
def kb():
    with Cluster(1, num_partitions=2) as c:
        yield c


NOW = int(time.time() * 1000) - 60_000   # recent: old timestamps would roll segments by time


def batch(values, ts=NOW, pid=-1, epoch=-1, seq=-1, codec=0):
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           compression=codec)
    for i, v in enumerate(values):
        b.append(b"k", v, [], ts + i)
    return b.build()


def produce(raw, topic, part, records, acks=-1, version=9):
    P = ProduceRequest
    r = raw.call(P(acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=part, records=records)])]), version)
    return r.responses[0].partition_responses[0]


def fetch(raw, topic, part, offset, version=12, max_wait=0, min_bytes=0, max_bytes=1 << 20, **kw):
    F = FetchRequest
    req = F(max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes, topics=[F.FetchTopic(
        topic=topic, partitions=[F.FetchPartition(partition=part, fetch_offset=offset,
                                                  partition_max_bytes=max_bytes)])], **kw)
    return raw.call(req, version)


def values(records):
    return [r.value for b in iter_batches(records) for r in b]


def test_api_versions_and_unsupported_version_falls_back_to_v0(kb):
    with Raw(kb.bootstrap) as raw:
        r = raw.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert r.error_code == 0 and keys[0][1] >= 9 and keys[1][1] >= 12 and 18 in keys
        # a version the broker does not know: v0 answer with UNSUPPORTED_VERSION
        frame = bytearray(ApiVersionsRequest().encode(0))
        import struct
        head = struct.pack(">hhih", 18, 99, 7, 1) + b"x"
        raw.sock.sendall(struct.pack(">i", len(head) + len(frame)) + head + frame)
        body = raw.recv_frame()
        assert struct.unpack(">i", body[:4])[0] == 7
        v0 = ApiVersionsRequest  # noqa: F841 - the answer decodes as v0
        from kcodec.protocol import ApiVersionsResponse
        resp = ApiVersionsResponse.decode(body[4:], 0)
        assert resp.error_code == E.UNSUPPORTED_VERSION and resp.api_keys


def test_metadata_auto_create_and_describe_cluster(kb):
    with Raw(kb.bootstrap) as raw:
        M = MetadataRequest
        r = raw.call(M(topics=[M.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=False), 12)
        assert r.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        r = raw.call(M(topics=[M.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True), 12)
        t = r.topics[0]
        assert t.error_code == 0 and len(t.partitions) == 2 and t.partitions[0].leader_id == 0
        assert r.brokers[0].port == kb.nodes[0].port and r.cluster_id == kb.state.cluster_id
        r = raw.call(M(topics=[M.MetadataRequestTopic(name="bad name!")]), 12)
        assert r.topics[0].error_code == E.INVALID_TOPIC_EXCEPTION
        d = raw.call(DescribeClusterRequest(), 0)
        assert d.error_code == 0 and [b.broker_id for b in d.brokers] == [0]


def test_produce_fetch_list_offsets(kb):
    kb.create_topic("t", 1)
    with Raw(kb.bootstrap) as raw:
        p = produce(raw, "t", 0, batch([b"a", b"b", b"c"]))
        assert (p.error_code, p.base_offset) == (0, 0)
        p = produce(raw, "t", 0, batch([b"d"], codec=3))   # lz4
        assert (p.error_code, p.base_offset) == (0, 3)
        f = fetch(raw, "t", 0, 0).responses[0].partitions[0]
        assert f.error_code == 0 and f.high_watermark == 4 and f.log_start_offset == 0
        assert values(f.records) == [b"a", b"b", b"c", b"d"]
        assert [b.base_offset for b in iter_batches(f.records)] == [0, 3]
        f = fetch(raw, "t", 0, 3).responses[0].partitions[0]
        assert values(f.records) == [b"d"]
        f = fetch(raw, "t", 0, 99).responses[0].partitions[0]
        assert f.error_code == E.OFFSET_OUT_OF_RANGE
        f = fetch(raw, "nope", 0, 0).responses[0].partitions[0]
        assert f.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        L = ListOffsetsRequest

        def lo(ts):
            r = raw.call(L(replica_id=-1, topics=[L.ListOffsetsTopic(name="t", partitions=[
                L.ListOffsetsPartition(partition_index=0, timestamp=ts)])]), 7)
            x = r.topics[0].partitions[0]
            return x.error_code, x.offset, x.timestamp
        assert lo(-2) == (0, 0, -1)
        assert lo(-1) == (0, 4, -1)
        assert lo(NOW + 1) == (0, 1, NOW + 1)
        assert lo(NOW + 2)[1] == 2
        assert lo(NOW + 10**9)[1] == -1
        assert lo(-3)[1] == 2   # the max timestamp: the third record of the first batch


def test_fetch_max_bytes_keeps_whole_batches_and_min_one(kb):
    kb.create_topic("t", 1)
    with Raw(kb.bootstrap) as raw:
        for _ in range(5):
            produce(raw, "t", 0, batch([b"x" * 1000]))
        f = fetch(raw, "t", 0, 0, max_bytes=2500).responses[0].partitions[0]
        assert len(values(f.records)) == 2
        f = fetch(raw, "t", 0, 0, max_bytes=10).responses[0].partitions[0]
        assert len(values(f.records)) == 1   # at least one batch, so the consumer progresses


def test_fetch_long_poll_waits_for_data_and_times_out(kb):
    kb.create_topic("t", 1)
    with Raw(kb.bootstrap) as raw, Raw(kb.bootstrap) as raw2:
        t0 = time.monotonic()
        f = fetch(raw, "t", 0, 0, max_wait=300, min_bytes=1)
        assert time.monotonic() - t0 >= 0.25 and not f.responses[0].partitions[0].records
        F = FetchRequest
        raw.send(F(max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, topics=[F.FetchTopic(
            topic="t", partitions=[F.FetchPartition(partition=0, fetch_offset=0,
                                                    partition_max_bytes=1 << 20)])]), 12)
        time.sleep(0.2)
        t0 = time.monotonic()
        produce(raw2, "t", 0, batch([b"wake"]))
        from kcodec.protocol import decode_response
        r = decode_response(raw.recv_frame(), 1, 12)[1]
        assert time.monotonic() - t0 < 2
        assert values(r.responses[0].partitions[0].records) == [b"wake"]


def test_incremental_fetch_session(kb):
    kb.create_topic("t", 2)
    F = FetchRequest
    with Raw(kb.bootstrap) as raw:
        produce(raw, "t", 0, batch([b"a"]))
        parts = [F.FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=1 << 20) for i in (0, 1)]
        r = raw.call(F(max_wait_ms=0, min_bytes=0, session_id=0, session_epoch=0,
                       topics=[F.FetchTopic(topic="t", partitions=parts)]), 12)
        sid = r.session_id
        assert sid > 0 and len(r.responses[0].partitions) == 2
        # nothing changed and nothing listed: an empty incremental answer
        r = raw.call(F(max_wait_ms=0, min_bytes=0, session_id=sid, session_epoch=1,
                       topics=[F.FetchTopic(topic="t", partitions=[
                           F.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])]), 12)
        assert r.error_code == 0 and r.responses == []
        produce(raw, "t", 1, batch([b"b"]))
        r = raw.call(F(max_wait_ms=0, min_bytes=0, session_id=sid, session_epoch=2, topics=[]), 12)
        (part,) = r.responses[0].partitions
        assert part.partition_index == 1 and values(part.records) == [b"b"]
        r = raw.call(F(max_wait_ms=0, min_bytes=0, session_id=sid, session_epoch=9, topics=[]), 12)
        assert r.error_code == E.INVALID_FETCH_SESSION_EPOCH
        r = raw.call(F(max_wait_ms=0, min_bytes=0, session_id=12345, session_epoch=1, topics=[]), 12)
        assert r.error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_produce_errors(kb):
    kb.create_topic("t", 1, configs={"max.message.bytes": "2000"})
    with Raw(kb.bootstrap) as raw:
        good = batch([b"a"])
        bad = bytearray(good)
        bad[-1] ^= 0xFF   # CRC no longer matches
        assert produce(raw, "t", 0, bytes(bad)).error_code == E.CORRUPT_MESSAGE
        assert produce(raw, "t", 0, batch([b"x" * 5000])).error_code == E.MESSAGE_TOO_LARGE
        assert produce(raw, "t", 5, good).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(raw, "t", 0, good, acks=2).error_code == E.INVALID_REQUIRED_ACKS
        assert produce(raw, "t", 0, good).error_code == 0
        # the broker still serves after the bad ones; nothing bad was written
        assert values(fetch(raw, "t", 0, 0).responses[0].partitions[0].records) == [b"a"]


def test_compacted_topic_names_each_keyless_record(kb):
    # Kafka lists every keyless record of the batch (its index) as a record error, so a
    # client fails those with INVALID_RECORD and the rest of the batch apart
    kb.create_topic("c", 1, configs={"cleanup.policy": "compact"})
    b = RecordBatchBuilder()
    for i, key in enumerate([b"k", None, b"k", b"k", None]):
        b.append(key, b"v", [], NOW + i)
    with Raw(kb.bootstrap) as raw:
        r = produce(raw, "c", 0, b.build())
        assert r.error_code == E.INVALID_RECORD
        assert [e.batch_index for e in r.record_errors] == [1, 4]
        assert all("without key" in e.batch_index_error_message for e in r.record_errors)
        assert "2 record errors" in r.error_message
        assert produce(raw, "c", 0, batch([b"a"])).error_code == 0


def test_acks_zero_gets_no_answer_but_is_written(kb):
    kb.create_topic("t", 1)
    P = ProduceRequest
    with Raw(kb.bootstrap) as raw:
        raw.send(P(acks=0, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
            P.PartitionProduceData(index=0, records=batch([b"z"]))])]), 9)
        r = fetch(raw, "t", 0, 0)   # the next answer on the connection is the fetch's
        assert values(r.responses[0].partitions[0].records) == [b"z"]


def test_log_append_time(kb):
    kb.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
    with Raw(kb.bootstrap) as raw:
        before = int(time.time() * 1000)
        p = produce(raw, "t", 0, batch([b"a"], ts=1000))
        assert before <= p.log_append_time_ms <= int(time.time() * 1000)
        (b,) = list(iter_batches(fetch(raw, "t", 0, 0).responses[0].partitions[0].records))
        assert [r.timestamp for r in b] == [p.log_append_time_ms]


def test_idempotence_duplicates_out_of_order_and_fencing(kb):
    kb.create_topic("t", 1)
    with Raw(kb.bootstrap) as raw:
        ip = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
        pid, ep = ip.producer_id, ip.producer_epoch
        assert ip.error_code == 0 and pid >= 0
        assert produce(raw, "t", 0, batch([b"a", b"b"], pid=pid, epoch=ep, seq=0)).base_offset == 0
        assert produce(raw, "t", 0, batch([b"c"], pid=pid, epoch=ep, seq=2)).base_offset == 2
        dup = produce(raw, "t", 0, batch([b"a", b"b"], pid=pid, epoch=ep, seq=0))
        assert (dup.error_code, dup.base_offset) == (0, 0)   # a retry: NONE, the original offset
        gap = produce(raw, "t", 0, batch([b"e"], pid=pid, epoch=ep, seq=5))
        assert gap.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert values(fetch(raw, "t", 0, 0).responses[0].partitions[0].records) == [b"a", b"b", b"c"]
        # a transactional id's second InitProducerId bumps the epoch: the old one is fenced
        t1 = raw.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
        t2 = raw.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
        assert t2.producer_id == t1.producer_id and t2.producer_epoch == t1.producer_epoch + 1
        old = produce(raw, "t", 0, batch([b"f"], pid=t1.producer_id, epoch=t1.producer_epoch, seq=0))
        assert old.error_code == E.INVALID_PRODUCER_EPOCH


def test_topics_create_delete_partitions_configs(kb):
    C = CreateTopicsRequest
    with Raw(kb.bootstrap) as raw:
        r = raw.call(C(topics=[
            C.CreatableTopic(name="a", num_partitions=3, replication_factor=1, configs=[
                C.CreatableTopicConfig(name="retention.ms", value="1000")]),
            C.CreatableTopic(name="b", num_partitions=0, replication_factor=1),
            C.CreatableTopic(name="c", num_partitions=1, replication_factor=3),
            C.CreatableTopic(name="d", num_partitions=1, replication_factor=1, configs=[
                C.CreatableTopicConfig(name="no.such.config", value="1")]),
        ], timeout_ms=1000), 7)
        assert [t.error_code for t in r.topics] == [0, E.INVALID_PARTITIONS,
                                                    E.INVALID_REPLICATION_FACTOR, E.INVALID_CONFIG]
        r = raw.call(C(topics=[C.CreatableTopic(name="a", num_partitions=1, replication_factor=1)]), 7)
        assert r.topics[0].error_code == E.TOPIC_ALREADY_EXISTS
        P = CreatePartitionsRequest
        r = raw.call(P(topics=[P.CreatePartitionsTopic(name="a", count=5, assignments=None)],
                       timeout_ms=1000), 3)
        assert r.results[0].error_code == 0 and len(kb.state.topics["a"].partitions) == 5
        D = DescribeConfigsRequest
        r = raw.call(D(resources=[D.DescribeConfigsResource(resource_type=2, resource_name="a",
                                                             configuration_keys=None)]), 4)
        got = {c.name: (c.value, c.config_source) for c in r.results[0].configs}
        assert got["retention.ms"] == ("1000", 1) and got["segment.bytes"][1] == 5
        A = IncrementalAlterConfigsRequest
        r = raw.call(A(resources=[A.AlterConfigsResource(resource_type=2, resource_name="a", configs=[
            A.AlterableConfig(name="retention.ms", config_operation=1, value=None),
            A.AlterableConfig(name="message.timestamp.type", config_operation=0, value="LogAppendTime"),
        ])]), 1)
        assert r.responses[0].error_code == 0
        assert kb.state.topics["a"].partitions[0].log.config.message_timestamp_type == "LogAppendTime"
        assert "retention.ms" not in kb.state.topics["a"].configs
        r = raw.call(DeleteTopicsRequest(topic_names=["a", "zz"], timeout_ms=1000), 5)
        assert [x.error_code for x in r.responses] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
        assert "a" not in kb.state.topics


def test_delete_records_and_offset_for_leader_epoch(kb):
    kb.create_topic("t", 1)
    with Raw(kb.bootstrap) as raw:
        for v in (b"a", b"b", b"c"):
            produce(raw, "t", 0, batch([v]))
        D = DeleteRecordsRequest
        r = raw.call(D(topics=[D.DeleteRecordsTopic(name="t", partitions=[
            D.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=1000), 2)
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.low_watermark) == (0, 2)
        f = fetch(raw, "t", 0, 0).responses[0].partitions[0]
        assert f.error_code == E.OFFSET_OUT_OF_RANGE and f.log_start_offset == 2
        assert values(fetch(raw, "t", 0, 2).responses[0].partitions[0].records) == [b"c"]
        r = raw.call(D(topics=[D.DeleteRecordsTopic(name="t", partitions=[
            D.DeleteRecordsPartition(partition_index=0, offset=10)])], timeout_ms=1000), 2)
        assert r.topics[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
        OE = OffsetForLeaderEpochRequest
        r = raw.call(OE(topics=[OE.OffsetForLeaderTopic(topic="t", partitions=[
            OE.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0)])]), 4)
        e = r.topics[0].partitions[0]
        assert (e.error_code, e.leader_epoch, e.end_offset) == (0, 0, 3)


def test_kcodec_client_groups_and_commits(kb):
    from kcodec.client import Admin, Consumer, Producer

    bs = kb.bootstrap
    with Admin(bootstrap_servers=bs) as admin:
        assert admin.create_topics(["g"], num_partitions=4)["g"] is None
    with Producer(bootstrap_servers=bs, compression_type="zstd") as p:
        for i in range(200):
            p.send("g", b"%d" % i, key=b"%d" % i)
        p.flush()
    seen = []
    with Consumer(bootstrap_servers=bs, group_id="grp", auto_offset_reset="earliest",
                  enable_auto_commit=False) as c:
        c.subscribe(["g"])
        deadline = time.monotonic() + 30
        while len(seen) < 200 and time.monotonic() < deadline:
            for _tp, rs in c.poll(0.5).items():
                seen += [r.value for r in rs]
        c.commit()
    assert sorted(seen, key=int) == [b"%d" % i for i in range(200)]
    with Admin(bootstrap_servers=bs) as admin:
        committed = admin.committed_offsets("grp")
        assert sum(committed.values()) == 200


def test_legacy_message_sets_are_accepted_and_served_back(kb):
    from kcodec.records import MessageSetBuilder

    kb.create_topic("old", 1)
    with Raw(kb.bootstrap) as raw:
        for magic in (0, 1):
            b = MessageSetBuilder(magic=magic)
            b.append(b"k", b"legacy%d" % magic, NOW if magic else None)
            r = produce(raw, "old", 0, b.build(), version=3)
            assert r.error_code == 0
        f = fetch(raw, "old", 0, 0, version=4).responses[0].partitions[0]
        got = [(bt.magic, [x.value for x in bt]) for bt in iter_batches(f.records)]
        assert got == [(0, [b"legacy0"]), (1, [b"legacy1"])]
