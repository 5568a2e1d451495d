"""kcodec's transactional producer against librdkafka's mock cluster (which implements the
transaction coordinator, markers and fencing, and takes injected errors).

The mock writes the markers but does not filter aborted records for read_committed
fetches (neither for kcodec's nor for librdkafka's own consumer), so the read_committed
check here reads the partition's batches and applies the markers as a read_committed
consumer must: records of a producer's transaction count only when its next marker is a
COMMIT. The mock also writes its markers with a zero CRC, so the log is read unchecked.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kcodec.client import Consumer, Producer
from kcodec.client.producer.transactions import (
    AbortableTransactionError,
    FatalTransactionError,
    ProducerFencedError,
    TransactionStateError,
)

pytestmark = pytest.mark.peers
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000, retry_backoff_ms=20)


@pytest.fixture
def mock():
    from tests.support.mock_cluster import MockCluster

    with MockCluster(3) as mc:
        yield mc


def _log(bootstrap: str, topic: str, partition: int = 0) -> list:
    """Every batch of the partition, as (is_control, producer_id, values or control type)."""
    import asyncio

    from kcodec.client.config import ConsumerConfig
    from kcodec.client.net import requests
    from kcodec.client.net.cluster import Cluster
    from kcodec.protocol import ApiKey
    from kcodec.records import iter_batches

    async def fetch() -> list:
        cl = Cluster(ConsumerConfig(bootstrap_servers=bootstrap, **FAST))
        batches: list = []
        try:
            leader = await cl.leader(topic, partition)
            conn = await cl.connection(leader)
            version = min(conn.core.version(ApiKey.FETCH), 12)   # topics by name
            offset = 0
            while True:     # the mock answers one batch per fetch
                r = await cl.request(leader, requests.fetch(
                    max_wait_ms=10, min_bytes=1, max_bytes=1 << 20, read_committed=False,
                    session_id=0, session_epoch=-1, partitions=[(topic, partition, offset)],
                    partition_max_bytes=1 << 20), version)
                got = list(iter_batches(r.responses[0].partitions[0].records or b"",
                                        validate_crc=False))
                if not got:
                    return batches
                batches += got
                offset = got[-1].next_offset
        finally:
            await cl.close()
    out = []
    for b in asyncio.run(fetch()):
        if b.is_control:
            out.append((True, b.producer_id, b.records()[0].control_type))
        else:
            assert b.is_transactional
            out.append((False, b.producer_id, [r.value for r in b.records()]))
    return out


def _read_committed(log: list) -> list[bytes]:
    """What a read_committed consumer returns, from the batches and markers."""
    out: list[bytes] = []
    pending: dict[int, list[bytes]] = {}
    for is_control, pid, what in log:
        if is_control:
            vals = pending.pop(pid, [])
            if what == 1:
                out += vals
        else:
            pending.setdefault(pid, []).extend(what)
    return out


def _txn_producer(mock, tid: str | None = None, **kw) -> Producer:
    return Producer(bootstrap_servers=mock.bootstrap, transactional_id=tid or f"tx-{uuid.uuid4().hex[:6]}",
                    **FAST, **kw)


def test_commit_and_abort_read_committed(mock):
    mock.create_topic("t", 1)
    p = _txn_producer(mock)
    try:
        p.init_transactions()
        p.begin_transaction()
        futs = [p.send("t", f"c{i}".encode(), partition=0) for i in range(5)]
        p.commit_transaction()
        assert [f.result(1).offset for f in futs] == [0, 1, 2, 3, 4]
        p.begin_transaction()
        for i in range(4):
            p.send("t", f"a{i}".encode(), partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        for i in range(3):
            p.send("t", f"d{i}".encode(), partition=0)
        p.commit_transaction()
    finally:
        p.close()
    log = _log(mock.bootstrap, "t")
    assert [(c, w) for c, _, w in log if c] == [(True, 1), (True, 0), (True, 1)]
    assert _read_committed(log) == [b"c0", b"c1", b"c2", b"c3", b"c4", b"d0", b"d1", b"d2"]


def test_abort_drops_unsent_records_and_the_next_transaction_commits(mock):
    mock.create_topic("u", 1)
    p = _txn_producer(mock, linger_ms=60000)      # nothing leaves before the abort
    try:
        p.init_transactions()
        p.begin_transaction()
        futs = [p.send("u", b"never", partition=0) for _ in range(3)]
        p.abort_transaction()
        for f in futs:
            with pytest.raises(AbortableTransactionError):
                f.result(5)
        p.begin_transaction()
        f = p.send("u", b"kept", partition=0)
        p.commit_transaction()
        assert f.result(1).offset >= 0
    finally:
        p.close()
    assert _read_committed(_log(mock.bootstrap, "u")) == [b"kept"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(mock):
    mock.create_topic("in", 1)
    mock.create_topic("out", 1)
    with Producer(bootstrap_servers=mock.bootstrap, **FAST) as src:
        for i in range(10):
            src.send("in", f"{i}".encode(), partition=0)
    c = Consumer(bootstrap_servers=mock.bootstrap, group_id="ctp", auto_offset_reset="earliest",
                 enable_auto_commit=False, isolation_level="read_committed", check_crcs=False,
                 **FAST)
    p = _txn_producer(mock)
    mock.track_requests()
    try:
        c.subscribe(["in"])
        p.init_transactions()
        done = 0
        deadline = time.monotonic() + 20
        while done < 10 and time.monotonic() < deadline:
            polled = c.poll(0.5)
            if not polled:
                continue
            p.begin_transaction()
            offsets = {}
            for tp, recs in polled.items():
                for r in recs:
                    p.send("out", r.value * 2, partition=0)
                offsets[tp] = recs[-1].offset + 1
                done += len(recs)
            p.send_offsets_to_transaction(offsets, c.group_metadata())
            p.commit_transaction()
        assert done == 10
    finally:
        p.close()
        c.close()
    assert _read_committed(_log(mock.bootstrap, "out")) == [f"{i}".encode() * 2 for i in range(10)]
    # the mock accepts TxnOffsetCommit but does not keep transactional offsets (librdkafka's
    # own producer's are not visible either): check the requests went out, in Java's order
    keys = mock.requests()
    assert 25 in keys and 28 in keys and 26 in keys
    assert keys.index(25) < keys.index(28) < keys.index(26)
    assert keys.count(25) == keys.count(28) == keys.count(26)   # once per transaction


def _poll_all(c: Consumer, seconds: float) -> list:
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for recs in c.poll(0.3).values():
            got += recs
    return got


@pytest.mark.parametrize("api_key,code", [(0, 90), (0, 47), (24, 47), (24, 90)])
def test_fenced_zombie_is_fatal(mock, api_key, code):
    """A producer whose epoch was taken over (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, on
    Produce or AddPartitionsToTxn) stops for good, as Java's ProducerFencedException. (The
    mock hands a second producer with the same transactional_id a new producer id instead
    of bumping the epoch, so the broker's answer is injected here; kcodec's broker will
    fence for real.)"""
    mock.create_topic("z", 1)
    old = _txn_producer(mock, "shared-id")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("z", b"before", partition=0)
        old.flush()
        mock.push_errors(api_key, code)
        if api_key == 0:
            f = old.send("z", b"zombie", partition=0)
        else:
            mock.create_topic("z2", 1)
            f = old.send("z2", b"zombie", partition=0)   # a new partition: AddPartitionsToTxn
        with pytest.raises(FatalTransactionError):
            f.result(10)
        with pytest.raises(ProducerFencedError, match="fenced"):
            old.commit_transaction()
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()      # fatal: the zombie can do nothing more
    finally:
        old.close()
    new = _txn_producer(mock, "shared-id")
    try:
        new.init_transactions()
        new.begin_transaction()
        new.send("z", b"live", partition=0)
        new.commit_transaction()
    finally:
        new.close()
    assert b"live" in _read_committed(_log(mock.bootstrap, "z"))


def test_abortable_error_then_abort_then_commit(mock):
    mock.create_topic("ab", 1)
    p = _txn_producer(mock)
    try:
        p.init_transactions()
        p.begin_transaction()
        mock.push_errors(24, 29)            # AddPartitionsToTxn: TOPIC_AUTHORIZATION_FAILED
        f = p.send("ab", b"lost", partition=0)
        with pytest.raises(AbortableTransactionError, match="TOPIC_AUTHORIZATION_FAILED"):
            p.commit_transaction()
        with pytest.raises(AbortableTransactionError):
            f.result(5)
        with pytest.raises(AbortableTransactionError):
            p.send("ab", b"not now", partition=0)
        p.abort_transaction()
        p.begin_transaction()
        p.send("ab", b"ok", partition=0)
        p.commit_transaction()
    finally:
        p.close()
    assert _read_committed(_log(mock.bootstrap, "ab")) == [b"ok"]


def test_offset_commit_errors_are_abortable(mock):
    mock.create_topic("oc", 1)
    p = _txn_producer(mock)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("oc", b"x", partition=0)
        mock.push_errors(28, 30)            # TxnOffsetCommit: GROUP_AUTHORIZATION_FAILED
        with pytest.raises(AbortableTransactionError, match="GROUP_AUTHORIZATION_FAILED"):
            p.send_offsets_to_transaction({("oc", 0): 1}, "some-group")
        p.abort_transaction()
    finally:
        p.close()
    assert _read_committed(_log(mock.bootstrap, "oc")) == []


def test_retriable_coordinator_errors_are_retried(mock):
    mock.create_topic("r", 1)
    p = _txn_producer(mock)
    try:
        mock.push_errors(22, 51, 14)        # InitProducerId: CONCURRENT_TRANSACTIONS, LOADING
        p.init_transactions()
        p.begin_transaction()
        mock.push_errors(24, 51, 51)        # AddPartitionsToTxn: CONCURRENT_TRANSACTIONS
        mock.push_errors(26, 16)            # EndTxn: NOT_COORDINATOR -> find it again
        p.send("r", b"x", partition=0)
        p.commit_transaction()
    finally:
        p.close()
    assert _read_committed(_log(mock.bootstrap, "r")) == [b"x"]


def test_fatal_errors_end_the_producer(mock):
    p = _txn_producer(mock)
    try:
        mock.push_errors(22, 53)            # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        with pytest.raises(FatalTransactionError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
            p.init_transactions()
    finally:
        p.close()
    p = _txn_producer(mock)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("f", b"x", partition=0)
        mock.push_errors(26, 90)            # EndTxn: PRODUCER_FENCED (e.g. after a timeout)
        with pytest.raises(ProducerFencedError, match="transaction_timeout_ms"):
            p.commit_transaction()
    finally:
        p.close()


def test_calls_out_of_order_are_state_errors(mock):
    p = _txn_producer(mock)
    try:
        with pytest.raises(TransactionStateError):
            p.begin_transaction()            # before init_transactions
        p.init_transactions()
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.send("s", b"x")
        with pytest.raises(TransactionStateError):
            p.commit_transaction()
        p.begin_transaction()
        with pytest.raises(TransactionStateError):
            p.begin_transaction()
        p.abort_transaction()                # nothing was sent: no EndTxn needed
    finally:
        p.close()
    with Producer(bootstrap_servers=mock.bootstrap, **FAST) as plain:
        with pytest.raises(TransactionStateError, match="transactional_id"):
            plain.begin_transaction()
