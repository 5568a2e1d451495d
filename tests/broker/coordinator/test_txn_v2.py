"""Transactions v2 (KIP-890 part 2) and two-phase commit (KIP-939) on kcodec's broker, with
kcodec's producer: which requests each generation sends, the epoch bump at every end, the
zombie batch it fences, EndTxn retries and epoch overflow, and the 2PC flow (prepare, crash,
keep the prepared transaction, complete it)."""

from __future__ import annotations

import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, PreparedTxnState, Producer, ProducerFencedError, TopicPartition
from kcodec.errors import UnsupportedVersionError
from kcodec.protocol import (
    AddPartitionsToTxnRequest,
    ApiKey,
    ApiVersionsRequest,
    EndTxnRequest,
    ErrorCode,
    InitProducerIdRequest,
    ProduceRequest,
)
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw
from tests.support.txn_util import FAST, confluent_read, kcodec_read

pytestmark = [pytest.mark.broker]
E = ErrorCode


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap, **FAST) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def _keys(cluster: Cluster) -> list[tuple[int, int]]:
    return [(r.api_key, r.api_version) for r in cluster.requests]


@pytest.mark.parametrize("level", [2, 1])
def test_each_generation_sends_its_own_requests(level):
    """v2: no AddPartitionsToTxn nor AddOffsetsToTxn, Produce v12+, TxnOffsetCommit v5,
    EndTxn v5 with a new epoch per transaction. v1: the adds, Produce <= v11,
    TxnOffsetCommit <= v4, EndTxn <= v4 and one epoch throughout."""
    with Cluster(transaction_version=level) as c:
        topic = _topic(c.bootstrap)
        with Producer(bootstrap_servers=c.bootstrap, transactional_id="gen", **FAST) as p:
            p.init_transactions()
            epochs = [p._engine.accumulator.epoch]
            c.record()
            for i in range(3):
                p.begin_transaction()
                p.send(topic, f"v{i}".encode(), partition=0)
                p.send_offsets_to_transaction({TopicPartition(topic, 0): i + 1}, "g-gen")
                p.commit_transaction()
                epochs.append(p._engine.accumulator.epoch)
            assert p._engine.txn.v2 is (level == 2)
        seen = _keys(c)
        c.record(False)
        kinds = {k for k, _ in seen}
        if level == 2:
            assert ApiKey.ADD_PARTITIONS_TO_TXN not in kinds
            assert ApiKey.ADD_OFFSETS_TO_TXN not in kinds
            assert all(v >= 12 for k, v in seen if k == ApiKey.PRODUCE)
            assert all(v == 5 for k, v in seen if k in (ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT))
            assert epochs == sorted(set(epochs)) and len(epochs) == 4   # bumped every end
        else:
            assert ApiKey.ADD_PARTITIONS_TO_TXN in kinds and ApiKey.ADD_OFFSETS_TO_TXN in kinds
            assert all(v <= 11 for k, v in seen if k == ApiKey.PRODUCE)
            assert all(v <= 4 for k, v in seen if k in (ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT))
            assert len(set(epochs)) == 1
        with Admin(bootstrap_servers=c.bootstrap, **FAST) as admin:
            assert admin.committed_offsets("g-gen")[TopicPartition(topic, 0)] == 3
        assert kcodec_read(c.bootstrap, topic, "read_committed", 3) == [b"v0", b"v1", b"v2"]
        assert confluent_read(c.bootstrap, topic, 3) == [b"v0", b"v1", b"v2"]


def test_api_versions_finalize_the_transaction_version():
    for level in (2, 1, 0):
        with Cluster(transaction_version=level) as c, Raw(c.bootstrap) as raw:
            r = raw.call(ApiVersionsRequest(client_software_name="t",
                                            client_software_version="1"), 3)
            finalized = {f.name: f.max_version_level for f in r.finalized_features}
            assert finalized.get("transaction.version", 0) == level
            assert {f.name for f in r.supported_features} == {"transaction.version"}
    with pytest.raises(ValueError, match="transaction_version"):
        Cluster(transaction_version=3)


def _batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)
    b.append(None, value)
    return b.build()


def _produce(raw: Raw, tid: str, topic: str, data: bytes, version: int) -> int:
    P = ProduceRequest
    r = raw.call(P(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(
            index=0, records=data)])]), version)
    return r.responses[0].partition_responses[0].error_code


def test_v2_fences_a_zombie_batch_of_an_ended_transaction():
    """The late batch of a transaction that ended (the producer's epoch before EndTxn v5)
    is refused; under the first generation the same batch would open a hanging
    transaction -- what KIP-890 ends."""
    with Cluster(transaction_version=2) as c:
        topic = _topic(c.bootstrap)
        tid = "zombie-late"
        with Raw(c.bootstrap) as raw:
            init = raw.call(InitProducerIdRequest(transactional_id=tid,
                                                  transaction_timeout_ms=30000), 5)
            pid, epoch = init.producer_id, init.producer_epoch
            # Produce v12 adds the partition itself: no AddPartitionsToTxn
            assert _produce(raw, tid, topic, _batch(pid, epoch, 0, b"in"), 12) == 0
            end = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                         producer_epoch=epoch, committed=True), 5)
            assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, epoch + 1)
            # a retry of that EndTxn (its answer lost) gets the same new identity
            again = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                           producer_epoch=epoch, committed=True), 5)
            assert (again.error_code, again.producer_id, again.producer_epoch) == \
                (0, pid, epoch + 1)
            # but not the other outcome
            other = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                           producer_epoch=epoch, committed=False), 5)
            assert other.error_code == E.PRODUCER_FENCED
            # the zombie's late batch (old epoch, next sequence)
            assert _produce(raw, tid, topic, _batch(pid, epoch, 1, b"late"), 12) == \
                E.INVALID_PRODUCER_EPOCH
            # the new epoch goes on from sequence 0
            assert _produce(raw, tid, topic, _batch(pid, epoch + 1, 0, b"next"), 12) == 0
            end = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                         producer_epoch=epoch + 1, committed=True), 5)
            assert end.error_code == 0 and end.producer_epoch == epoch + 2
        assert kcodec_read(c.bootstrap, topic, "read_committed", 2) == [b"in", b"next"]


def test_v2_epoch_overflow_moves_to_a_new_producer_id():
    with Cluster(transaction_version=2) as c, Raw(c.bootstrap) as raw:
        topic = _topic(c.bootstrap)
        tid = "overflow"
        init = raw.call(InitProducerIdRequest(transactional_id=tid,
                                              transaction_timeout_ms=30000), 5)
        pid = init.producer_id
        last = 32767
        # an id at its last epoch (as after 32767 transactions)
        c.producer_ids.restore(tid, pid, last)
        c.txns.txns[tid].epoch = last
        assert _produce(raw, tid, topic, _batch(pid, last, 0, b"last"), 12) == 0
        end = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                     producer_epoch=last, committed=True), 5)
        assert end.error_code == 0 and end.producer_id != pid and end.producer_epoch == 0
        npid = end.producer_id
        assert _produce(raw, tid, topic, _batch(npid, 0, 0, b"first"), 12) == 0
        assert raw.call(EndTxnRequest(transactional_id=tid, producer_id=npid, producer_epoch=0,
                                      committed=True), 5).error_code == 0
    # (the cluster is gone: read nothing more)


def test_v1_producer_on_a_v2_broker_and_batched_add_partitions():
    """A first-generation producer (AddPartitionsToTxn v3, EndTxn v4) is served as before
    by a v2 broker; AddPartitionsToTxn v4+ (the brokers' batched form, verify_only)."""
    with Cluster(transaction_version=2) as c, Raw(c.bootstrap) as raw:
        topic = _topic(c.bootstrap)
        tid = "old-gen"
        init = raw.call(InitProducerIdRequest(transactional_id=tid,
                                              transaction_timeout_ms=30000), 4)
        pid, epoch = init.producer_id, init.producer_epoch
        A = AddPartitionsToTxnRequest
        add = raw.call(A(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                             A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3)
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

        def verify(partition: int) -> int:
            r = raw.call(A(transactions=[A.AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
                topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[partition])])]), 5)
            assert r.error_code == 0
            return r.results_by_transaction[0].topic_results[0].results_by_partition[0] \
                .partition_error_code
        assert verify(0) == 0
        assert verify(1) == E.TRANSACTION_ABORTABLE     # never added
        assert _produce(raw, tid, topic, _batch(pid, epoch, 0, b"old"), 11) == 0
        end = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                     producer_epoch=epoch, committed=True), 4)
        assert end.error_code == 0
        # no bump for the first generation: the same epoch goes on
        assert raw.call(A(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                          v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                              A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3) \
            .results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0


# ---------------------------------------------------------------------- two-phase commit
@pytest.fixture(scope="module")
def two_pc():
    with Cluster(transaction_two_phase_commit_enable=True) as c:
        yield c


def _two_pc_producer(bootstrap: str, tid: str, **kw) -> Producer:
    return Producer(bootstrap_servers=bootstrap, transactional_id=tid,
                    transaction_two_phase_commit_enable=True, **FAST, **kw)


@pytest.mark.parametrize("matches", [True, False], ids=["commit", "abort"])
def test_two_phase_commit_survives_a_crash(two_pc, matches):
    """Prepare, record the state, crash; a new producer keeps the prepared transaction and
    completes it: committed if the recorded state is the coordinator's, else aborted."""
    topic = _topic(two_pc.bootstrap)
    tid = f"2pc-{topic}"
    p = _two_pc_producer(two_pc.bootstrap, tid)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"prepared", partition=0)
    state = p.prepare_transaction()
    with pytest.raises(Exception, match="state"):
        p.send(topic, b"no more", partition=0)     # prepared: nothing else may be sent
    p.close(0)                                      # the process dies after prepare
    recorded = str(state) if matches else str(PreparedTxnState(state.producer_id, 0
                                                                 if state.epoch else 1))
    with _two_pc_producer(two_pc.bootstrap, tid) as again:
        again.init_transactions(keep_prepared_txn=True)   # the transaction stays open
        assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 0, timeout=1) == []
        assert again.complete_transaction(recorded) is matches
        # the producer goes on with transactions of its own
        again.begin_transaction()
        again.send(topic, b"after", partition=0)
        again.commit_transaction()
    want = [b"prepared", b"after"] if matches else [b"after"]
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", len(want)) == want
    with pytest.raises(ProducerFencedError):   # the crashed producer's epoch is gone
        old = _two_pc_producer(two_pc.bootstrap, tid)
        try:
            old._engine.accumulator.set_producer(state.producer_id, state.epoch)
            old._txn().state = "READY"
            old.begin_transaction()
            old.send(topic, b"zombie", partition=0)
            old.commit_transaction()
        finally:
            old.close(0)


@pytest.mark.parametrize("matches", [True, False], ids=["commit", "abort"])
def test_keep_prepared_at_the_last_epoch_moves_to_a_new_producer_id(two_pc, matches):
    """A transaction prepared at its id's last epoch and kept by a new producer: the new
    producer gets a new producer id (epoch 0), as Kafka does, not CONCURRENT_TRANSACTIONS
    again and again, and completes the kept transaction with it; the markers end it under
    the id its records carry, and that id is fenced."""
    topic = _topic(two_pc.bootstrap)
    tid = f"2pc-last-{topic}"
    pid0 = 4242
    two_pc.producer_ids.restore(tid, pid0, 32766)    # as after 32766 epochs of the id
    p = _two_pc_producer(two_pc.bootstrap, tid)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"prepared", partition=0)
    state = p.prepare_transaction()
    assert (state.producer_id, state.epoch) == (pid0, 32767)
    p.close(0)
    recorded = str(state) if matches else str(PreparedTxnState(pid0, 0))
    with _two_pc_producer(two_pc.bootstrap, tid) as again:
        again.init_transactions(keep_prepared_txn=True)
        acc = again._engine.accumulator
        assert acc.producer_id != pid0 and acc.epoch == 0
        assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 0, timeout=1) == []
        assert again.complete_transaction(recorded) is matches
        again.begin_transaction()
        again.send(topic, b"after", partition=0)
        again.commit_transaction()
    want = [b"prepared", b"after"] if matches else [b"after"]
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", len(want)) == want
    with Admin(bootstrap_servers=two_pc.bootstrap, **FAST) as admin:
        assert not admin.list_transactions(states=["Ongoing"], pattern=tid)
    old = _two_pc_producer(two_pc.bootstrap, tid)
    try:        # the old id at its last epoch is fenced
        old._engine.accumulator.set_producer(pid0, 32767)
        old._txn().state = "READY"
        with pytest.raises(Exception, match="(?i)fenced|mapping"):
            old.begin_transaction()
            old.send(topic, b"zombie", partition=0).result(10)
            old.commit_transaction()
    finally:
        old.close(0)
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", len(want)) == want


def test_two_phase_transaction_does_not_time_out(two_pc):
    topic = _topic(two_pc.bootstrap)
    with _two_pc_producer(two_pc.bootstrap, f"slow-{topic}", transaction_timeout_ms=500) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"slow", partition=0)
        p.prepare_transaction()
        time.sleep(1.5)                     # three times the timeout: not aborted
        p.commit_transaction()
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 1) == [b"slow"]


def test_keep_prepared_without_an_open_transaction_completes_nothing(two_pc):
    with _two_pc_producer(two_pc.bootstrap, f"none-{uuid.uuid4().hex[:6]}") as p:
        p.init_transactions(keep_prepared_txn=True)
        assert p.complete_transaction("7:3") is False
        p.begin_transaction()               # an ordinary producer from here
        p.abort_transaction()


def test_two_phase_commit_refused_where_the_broker_does_not_allow_it():
    with Cluster() as c:
        p = _two_pc_producer(c.bootstrap, "refused")
        try:
            with pytest.raises(Exception, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
                p.init_transactions()
        finally:
            p.close(0)
        c.cap_versions("InitProducerId", 5)
        p = _two_pc_producer(c.bootstrap, "old-broker")
        try:
            with pytest.raises(UnsupportedVersionError, match="KIP-939"):
                p.init_transactions()
        finally:
            p.close(0)
    with pytest.raises(ValueError, match="transactional_id"):
        Producer(bootstrap_servers="127.0.0.1:1", transaction_two_phase_commit_enable=True)


def test_prepared_txn_state_text_form():
    s = PreparedTxnState(1234, 7)
    assert str(s) == "1234:7" and PreparedTxnState.parse("1234:7") == s
    assert PreparedTxnState.parse("") == PreparedTxnState()
    for bad in ("12", "a:b", "1:2:3"):
        with pytest.raises(ValueError, match="producer id"):
            PreparedTxnState.parse(bad)
