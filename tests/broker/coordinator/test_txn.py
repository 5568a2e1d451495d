"""kcodec's broker as a transaction coordinator: kcodec's and confluent-kafka's transactional
producers commit and abort against it; read_committed consumers (kcodec's and librdkafka's)
agree and never see an aborted record, read_uncommitted ones see everything; offsets sent in
a transaction reach the group only on commit; the last stable offset bounds read_committed
fetches and ListOffsets; a zombie producer is fenced; a transaction open past its timeout
is aborted by the coordinator. Each runs on both protocol generations: transactions v2
(KIP-890, the cluster's transaction.version 2, which kcodec's producer then uses) and the
first generation (transaction.version 1)."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, Producer, ProducerFencedError, TopicPartition
from kcodec.protocol import ListOffsetsRequest
from tests.support.broker_raw import Raw
from tests.support.txn_util import FAST, confluent_read, consume_transform_produce, kcodec_read

pytestmark = [pytest.mark.broker]


@pytest.fixture(scope="module", params=[2, 1], ids=["txn-v2", "txn-v1"])
def broker(request):
    with Cluster(transaction_version=request.param) as c:
        yield c.bootstrap


def _topic(broker: str, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=broker, **FAST) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def _kcodec_read(bootstrap: str, topic: str, isolation: str, n: int, partitions: int = 1,
                 timeout: float = 10) -> list[bytes]:
    return kcodec_read(bootstrap, topic, isolation, n, partitions, timeout)


def _confluent_read(bootstrap: str, topic: str, n: int, partitions: int = 1,
                    isolation: str = "read_committed") -> list[bytes]:
    return confluent_read(bootstrap, topic, n, partitions, isolation, timeout=10)


def _latest(broker: str, topic: str, isolation: int) -> int:
    L = ListOffsetsRequest
    with Raw(broker) as raw:
        r = raw.call(L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 5)
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset


def test_kcodec_producer_commit_and_abort(broker):
    topic = _topic(broker)
    with Producer(bootstrap_servers=broker, transactional_id=f"k-{topic}", **FAST) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"c{i}".encode(), partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"a{i}".encode(), partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"d0", partition=0)
        p.commit_transaction()
    committed = [b"c0", b"c1", b"c2", b"d0"]
    assert _kcodec_read(broker, topic, "read_committed", 4) == committed
    assert _confluent_read(broker, topic, 4) == committed
    everything = [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"d0"]
    assert _kcodec_read(broker, topic, "read_uncommitted", 7) == everything
    assert _confluent_read(broker, topic, 7, isolation="read_uncommitted") == everything


def test_confluent_producer_commit_and_abort(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = _topic(broker, partitions=2)
    p = confluent_kafka.Producer({"bootstrap.servers": broker, "transactional.id": f"c-{topic}",
                                  "linger.ms": 5})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"a{i}".encode(), partition=i % 2)
    p.flush(20)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic, b"d0", partition=1)
    p.commit_transaction(20)
    committed = {b"c0", b"c1", b"c2", b"c3", b"d0"}
    k = _kcodec_read(broker, topic, "read_committed", 5, partitions=2)
    c = _confluent_read(broker, topic, 5, partitions=2)
    assert len(k) == len(c) == 5 and set(k) == set(c) == committed
    u = _kcodec_read(broker, topic, "read_uncommitted", 9, partitions=2)
    assert len(u) == 9 and set(u) == committed | {b"a0", b"a1", b"a2", b"a3"}


def test_last_stable_offset_bounds_read_committed(broker):
    topic = _topic(broker)
    with Producer(bootstrap_servers=broker, **FAST) as plain:
        plain.send(topic, b"before", partition=0)
        plain.flush()
    with Producer(bootstrap_servers=broker, transactional_id=f"lso-{topic}", **FAST) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"open", partition=0)
        p.flush()
        with Producer(bootstrap_servers=broker, **FAST) as plain:
            plain.send(topic, b"after", partition=0)    # past the open transaction
            plain.flush()
        assert _latest(broker, topic, 0) == 3           # high watermark
        assert _latest(broker, topic, 1) == 1           # last stable offset
        assert _kcodec_read(broker, topic, "read_committed", 1, timeout=3) == [b"before"]
        assert _kcodec_read(broker, topic, "read_uncommitted", 3) == [b"before", b"open", b"after"]
        p.commit_transaction()
    assert _latest(broker, topic, 1) == _latest(broker, topic, 0) == 4   # + the marker
    assert _kcodec_read(broker, topic, "read_committed", 3) == [b"before", b"open", b"after"]
    assert _confluent_read(broker, topic, 3) == [b"before", b"open", b"after"]


def test_send_offsets_to_transaction_moves_group_offsets_on_commit_only(broker):
    src, dst = _topic(broker), _topic(broker)
    group = f"g-{src}"
    tp = TopicPartition(src, 0)
    with Producer(bootstrap_servers=broker, transactional_id=f"o-{src}", **FAST) as p, \
            Admin(bootstrap_servers=broker, **FAST) as admin:
        p.init_transactions()
        p.begin_transaction()
        p.send(dst, b"x", partition=0)
        p.send_offsets_to_transaction({tp: 5}, group)
        assert admin.committed_offsets(group).get(tp) in (None, -1)   # not before the commit
        p.commit_transaction()
        assert admin.committed_offsets(group)[tp] == 5
        p.begin_transaction()
        p.send(dst, b"y", partition=0)
        p.send_offsets_to_transaction({tp: 9}, group)
        p.abort_transaction()
        assert admin.committed_offsets(group)[tp] == 5                # the abort left it
    assert _kcodec_read(broker, dst, "read_committed", 1) == [b"x"]


def test_confluent_send_offsets_to_transaction(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    src, dst = _topic(broker), _topic(broker)
    group = f"g-{src}"
    with Producer(bootstrap_servers=broker, **FAST) as plain:
        for i in range(3):
            plain.send(src, f"{i}".encode(), partition=0)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
    p = confluent_kafka.Producer({"bootstrap.servers": broker, "transactional.id": f"co-{src}"})
    try:
        c.subscribe([src])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                got.append(m)
        assert len(got) == 3
        p.init_transactions(20)
        p.begin_transaction()
        for m in got:
            p.produce(dst, b"x" + m.value(), partition=0)
        p.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition(src, 0, got[-1].offset() + 1)],
            c.consumer_group_metadata(), 20)
        p.commit_transaction(20)
    finally:
        c.close()
    with Admin(bootstrap_servers=broker, **FAST) as admin:
        assert admin.committed_offsets(group)[TopicPartition(src, 0)] == 3
    assert _kcodec_read(broker, dst, "read_committed", 3) == [b"x0", b"x1", b"x2"]


def test_zombie_producer_is_fenced(broker):
    topic = _topic(broker)
    tid = f"z-{topic}"
    old = Producer(bootstrap_servers=broker, transactional_id=tid, **FAST)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie", partition=0)
        old.flush()
        with Producer(bootstrap_servers=broker, transactional_id=tid, **FAST) as new:
            new.init_transactions()            # aborts the old transaction, bumps the epoch
            with pytest.raises(ProducerFencedError):
                old.commit_transaction()
            new.begin_transaction()
            new.send(topic, b"new", partition=0)
            new.commit_transaction()
    finally:
        old.close(0)
    assert _kcodec_read(broker, topic, "read_committed", 1) == [b"new"]
    assert _confluent_read(broker, topic, 1) == [b"new"]
    assert _kcodec_read(broker, topic, "read_uncommitted", 2) == [b"zombie", b"new"]


def test_confluent_zombie_is_fenced(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = _topic(broker)
    tid = f"cz-{topic}"
    old = confluent_kafka.Producer({"bootstrap.servers": broker, "transactional.id": tid})
    old.init_transactions(20)
    old.begin_transaction()
    old.produce(topic, b"zombie", partition=0)
    old.flush(20)
    with Producer(bootstrap_servers=broker, transactional_id=tid, **FAST) as new:
        new.init_transactions()
        new.begin_transaction()
        new.send(topic, b"new", partition=0)
        new.commit_transaction()
    with pytest.raises(confluent_kafka.KafkaException) as err:
        old.commit_transaction(20)
    assert err.value.args[0].fatal()
    assert _confluent_read(broker, topic, 1) == [b"new"]


def test_timed_out_transaction_is_aborted(broker):
    topic = _topic(broker)
    p = Producer(bootstrap_servers=broker, transactional_id=f"to-{topic}",
                 transaction_timeout_ms=1000, **FAST)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"late", partition=0)
        p.flush()
        assert _latest(broker, topic, 1) == 0          # open: nothing stable yet
        deadline = time.monotonic() + 10
        while _latest(broker, topic, 1) != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _latest(broker, topic, 1) == 2          # the coordinator wrote ABORT
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
    finally:
        p.close(0)
    assert _kcodec_read(broker, topic, "read_committed", 0, timeout=2) == []
    assert _confluent_read(broker, topic, 0) == []
    assert _kcodec_read(broker, topic, "read_uncommitted", 1) == [b"late"]


def test_aborted_index_survives_a_restart(tmp_path):
    """The aborted transactions are kept in ``.txnindex`` files beside the segments: a
    restarted broker still hides them from read_committed consumers."""
    topic = "kept"
    with Cluster(data_dir=tmp_path) as c:
        c.create_topic(topic, partitions=1)
        with Producer(bootstrap_servers=c.bootstrap, transactional_id="r", **FAST) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send(topic, b"gone", partition=0)
            p.flush()
            p.abort_transaction()
            p.begin_transaction()
            p.send(topic, b"kept", partition=0)
            p.commit_transaction()
    files = list((tmp_path / "logs" / f"{topic}-0").glob("*.txnindex"))
    assert len(files) == 1 and files[0].stat().st_size == 34
    with Cluster(data_dir=tmp_path) as c:
        assert _kcodec_read(c.bootstrap, topic, "read_committed", 1) == [b"kept"]
        assert _confluent_read(c.bootstrap, topic, 1) == [b"kept"]
        assert _kcodec_read(c.bootstrap, topic, "read_uncommitted", 2) == [b"gone", b"kept"]


def test_txn_index_file_truncate_and_torn_entry(tmp_path):
    from kcodec.broker.log.segment import Segment
    from kcodec.broker.log.txnindex import TxnIndex

    seg = Segment(0, str(tmp_path), created_ms=0)
    idx = TxnIndex()
    idx.on_open(seg)
    idx.append(seg, 7, 0, 3, 0)
    idx.append(seg, 8, 4, 9, 4)
    assert idx.aborted_between(0, 10) == [(7, 0), (8, 4)]
    assert idx.aborted_between(4, 10) == [(8, 4)]       # the first ended before 4
    assert idx.aborted_between(0, 4) == [(7, 0)]        # the second starts at 4
    with open(seg.file(".txnindex"), "ab") as f:
        f.write(b"\x00\x00\x01")                         # a torn write at the end
    again = TxnIndex()
    again.on_open(seg)
    assert again.aborted_between(0, 10) == [(7, 0), (8, 4)]
    again.on_truncate(seg, 5)                            # the second marker is gone
    assert again.aborted_between(0, 10) == [(7, 0)]
    third = TxnIndex()
    third.on_open(seg)
    assert len(third) == 1
    third.on_delete(seg)
    assert len(third) == 0 and not os.path.exists(seg.file(".txnindex"))
    seg.close()


def test_consume_transform_produce_killed_at_random_points(broker):
    """Each round reads a little from ``src``, writes the transformed records to ``dst`` and
    the consumed offsets in one transaction, and is killed (producer and consumer dropped
    without commit or close) at a random point; the restarted producer (same
    transactional id) fences the dead one's transaction. At the end kcodec's and
    confluent-kafka's read_committed consumers see one copy of every input record in
    order: no duplicate, nothing lost."""
    src, dst = _topic(broker), _topic(broker)
    n = 40
    with Producer(bootstrap_servers=broker, **FAST) as p:
        for i in range(n):
            p.send(src, f"{i}".encode(), partition=0)
    done, kills = consume_transform_produce(broker, src, dst, seed=4321, kill_mid_send=0.05,
                                            kill_before_commit=0.2, max_poll_records=6)
    assert done and kills >= 2
    expected = [b"x" + f"{i}".encode() for i in range(n)]
    assert _kcodec_read(broker, dst, "read_committed", n) == expected
    assert _confluent_read(broker, dst, n) == expected
    assert len(_kcodec_read(broker, dst, "read_uncommitted", n)) >= n   # aborted ones too


def test_offset_fetch_require_stable_sees_pending_transaction(broker):
    """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition whose
    offsets wait in an open transaction; without it, the last committed offset."""
    from kcodec.protocol import ErrorCode, OffsetFetchRequest

    src = _topic(broker)
    group = f"g-{src}"
    OF = OffsetFetchRequest

    def fetch(stable: bool):
        with Raw(broker) as raw:
            r = raw.call(OF(group_id=group, require_stable=stable, topics=[OF.OffsetFetchRequestTopic(
                name=src, partition_indexes=[0])]), 7)
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    with Producer(bootstrap_servers=broker, transactional_id=f"s-{src}", **FAST) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition(src, 0): 4}, group)
        assert fetch(True)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert fetch(False) == (0, -1)
        p.commit_transaction()
    assert fetch(True) == (0, 4)


def test_init_producer_id_with_a_stale_epoch_is_fenced(broker):
    """InitProducerId naming an id and epoch (KIP-360) bumps the epoch only for the newest
    ones; an older instance naming its stale epoch is fenced."""
    from kcodec.protocol import ErrorCode, InitProducerIdRequest

    tid = f"k360-{uuid.uuid4().hex[:8]}"

    def init(pid: int, epoch: int):
        with Raw(broker) as raw:
            r = raw.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10000,
                                               producer_id=pid, producer_epoch=epoch), 4)
        return r.error_code, r.producer_id, r.producer_epoch

    code, pid, epoch = init(-1, -1)
    assert code == 0
    assert init(pid, epoch) == (0, pid, epoch + 1)          # the current one may bump
    assert init(pid, epoch)[0] == ErrorCode.PRODUCER_FENCED  # the stale one is fenced
    assert init(-1, -1) == (0, pid, epoch + 2)               # a new instance always may


def test_transaction_apis_advertised_and_old_epochs_answered_per_version(broker):
    from kcodec.protocol import ApiVersionsRequest, EndTxnRequest, ErrorCode, InitProducerIdRequest

    with Raw(broker) as raw:
        keys = {k.api_key: (k.min_version, k.max_version)
                for k in raw.call(ApiVersionsRequest(), 0).api_keys}
        assert {22, 24, 25, 26, 28} <= set(keys)
        tid = f"v-{uuid.uuid4().hex[:8]}"
        first = raw.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=5000), 1)
        raw.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=5000), 1)
        old = dict(transactional_id=tid, producer_id=first.producer_id,
                   producer_epoch=first.producer_epoch, committed=True)
        assert raw.call(EndTxnRequest(**old), 1).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert raw.call(EndTxnRequest(**old), 2).error_code == ErrorCode.PRODUCER_FENCED
        bad_timeout = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=0)
        assert raw.call(bad_timeout, 1).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_transactions_on_a_three_node_cluster():
    """The transaction coordinator is one node (FindCoordinator key type 1); the partitions'
    leaders are spread over the others."""
    with Cluster(nodes=3) as c:
        c.create_topic("spread", partitions=3)
        with Producer(bootstrap_servers=c.bootstrap, transactional_id="three", **FAST) as p:
            p.init_transactions()
            p.begin_transaction()
            for i in range(3):
                p.send("spread", f"a{i}".encode(), partition=i)
            p.flush()
            p.abort_transaction()
            p.begin_transaction()
            for i in range(3):
                p.send("spread", f"c{i}".encode(), partition=i)
            p.commit_transaction()
        got = _kcodec_read(c.bootstrap, "spread", "read_committed", 3, partitions=3)
        assert sorted(got) == [b"c0", b"c1", b"c2"]
        assert sorted(_confluent_read(c.bootstrap, "spread", 3, partitions=3)) == [b"c0", b"c1", b"c2"]
