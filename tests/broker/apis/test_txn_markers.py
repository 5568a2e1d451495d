"""WriteTxnMarkers served by kcodec's broker (raw requests, as an admin tool aborting a
hanging transaction sends them): the marker is written, the last stable offset moves, an
abort lands in the aborted index that read_committed fetches get, and partitions this node
does not lead, unknown partitions and stale epochs are refused per partition."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import (
    ErrorCode,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    WriteTxnMarkersRequest,
)
from kcodec.records import RecordBatchBuilder, iter_batches
from tests.broker.apis.test_apis import batch, produce
from tests.support.broker_raw import Raw
from tests.support.txn_util import confluent_read, kcodec_read

pytestmark = [pytest.mark.broker]
E = ErrorCode
W = WriteTxnMarkersRequest


@pytest.fixture
def cluster():
    with Cluster(2) as c:
        c.create_topic("hang", 2, leaders=[0, 1])
        yield c


def _txn_batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)
    for v in values:
        b.append(None, v, [], int(time.time() * 1000))
    return b.build()


def _lso_hw(raw: Raw, topic: str, partition: int) -> tuple[int, int]:
    L = ListOffsetsRequest
    out = []
    for isolation in (1, 0):
        r = raw.call(L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(partition_index=partition,
                                                           timestamp=-1)])]), 5)
        out.append(r.topics[0].partitions[0].offset)
    return out[0], out[1]


def _markers(raw: Raw, version: int, *markers: tuple[int, int, bool, dict[str, list[int]]]):
    req = W(markers=[W.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=0,
        topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()])
        for pid, epoch, commit, topics in markers])
    r = raw.call(req, version)
    return {(m.producer_id, t.name, p.partition_index): p.error_code
            for m in r.markers for t in m.topics for p in t.partitions}


def _hanging(raw: Raw, values: list[bytes]) -> tuple[int, int]:
    """A producer whose transactional records sit in partition 0 with no coordinator
    knowing of them: a hanging transaction that holds the last stable offset back."""
    ip = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert ip.error_code == 0
    r = produce(raw, "hang", 0, _txn_batch(values, ip.producer_id, ip.producer_epoch, 0))
    assert r.error_code == 0
    return ip.producer_id, ip.producer_epoch


@pytest.mark.parametrize("version", [1, 2])
def test_abort_a_hanging_transaction(cluster, version):
    node0 = cluster.nodes[0].address
    with Raw(node0) as raw:
        assert produce(raw, "hang", 0, batch([b"ok"])).error_code == 0
        pid, epoch = _hanging(raw, [b"h0", b"h1"])
        lso, hw = _lso_hw(raw, "hang", 0)
        assert lso < hw                        # stuck behind the hanging transaction
        res = _markers(raw, version, (pid, epoch, False, {"hang": [0]}))
        assert res == {(pid, "hang", 0): 0}
        lso2, hw2 = _lso_hw(raw, "hang", 0)
        assert lso2 == hw2 == hw + 1           # the ABORT marker, and nothing held back
        F = FetchRequest
        f = raw.call(F(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                       topics=[F.FetchTopic(topic="hang", partitions=[F.FetchPartition(
                           partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 12)
        p = f.responses[0].partitions[0]
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, lso)]
        assert p.last_stable_offset == hw2
    got = kcodec_read(node0, "hang", "read_committed", 0, timeout=3)
    assert b"h0" not in got and b"h1" not in got
    assert not {b"h0", b"h1"} & set(confluent_read(node0, "hang", 0, timeout=3))
    assert {b"h0", b"h1"} <= set(kcodec_read(node0, "hang", "read_uncommitted", 2))


def test_commit_marker_makes_the_records_visible(cluster):
    node0 = cluster.nodes[0].address
    with Raw(node0) as raw:
        pid, epoch = _hanging(raw, [b"c0", b"c1"])
        assert _markers(raw, 1, (pid, epoch, True, {"hang": [0]})) == {(pid, "hang", 0): 0}
        assert _lso_hw(raw, "hang", 0) == (3, 3)
        records = raw.call(FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                        isolation_level=1, topics=[FetchRequest.FetchTopic(
                                            topic="hang", partitions=[FetchRequest.FetchPartition(
                                                partition=0, fetch_offset=0,
                                                partition_max_bytes=1 << 20)])]), 12)
        batches = list(iter_batches(records.responses[0].partitions[0].records))
        assert batches[-1].is_control
        assert [r.control_type for r in batches[-1]] == [1]
    assert kcodec_read(node0, "hang", "read_committed", 2) == [b"c0", b"c1"]


def test_errors_per_partition(cluster):
    with Raw(cluster.nodes[0].address) as raw:
        pid, epoch = _hanging(raw, [b"x"])
        # a second InitProducerId bump on the partition: the newer epoch's records are there
        bumped = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                producer_id=pid, producer_epoch=epoch), 4)
        assert bumped.producer_epoch == epoch + 1
        assert produce(raw, "hang", 0, _txn_batch([b"y"], pid, epoch + 1, 0)).error_code == 0
        res = _markers(raw, 2, (pid, epoch, False, {"hang": [0, 1, 7], "nope": [0]}))
        assert res == {(pid, "hang", 0): E.INVALID_PRODUCER_EPOCH,    # a zombie's marker
                       (pid, "hang", 1): E.NOT_LEADER_OR_FOLLOWER,    # node 1 leads it
                       (pid, "hang", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                       (pid, "nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        lso, hw = _lso_hw(raw, "hang", 0)
        assert lso < hw                        # nothing was written
        assert _markers(raw, 2, (pid, epoch + 1, False, {"hang": [0]})) == {(pid, "hang", 0): 0}
        assert _lso_hw(raw, "hang", 0) == (hw + 1, hw + 1)
    with Raw(cluster.nodes[1].address) as raw:
        assert _markers(raw, 1, (pid, epoch + 1, False, {"hang": [1]})) == {(pid, "hang", 1): 0}
