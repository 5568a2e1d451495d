"""Transactions seen and ended from outside their producer, on kcodec's broker: listing and
describing (ListTransactions, DescribeTransactions), committing a prepared transaction from
its recorded state, and terminating one a stopped application left open -- the read_committed
reader is held back by it until then."""

from __future__ import annotations

import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, PreparedTxnState, Producer, ProducerFencedError
from kcodec.client.errors import KafkaError
from kcodec.protocol import ErrorCode, ListTransactionsRequest
from tests.support.broker_raw import Raw
from tests.support.txn_util import FAST, kcodec_read

pytestmark = [pytest.mark.broker]


@pytest.fixture(scope="module")
def two_pc():
    with Cluster(transaction_two_phase_commit_enable=True) as c:
        yield c


@pytest.fixture
def admin(two_pc):
    with Admin(bootstrap_servers=two_pc.bootstrap, **FAST) as a:
        yield a


def _topic(admin: Admin) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin.create_topics([name], num_partitions=2)
    return name


def _left_prepared(bootstrap: str, tid: str, topic: str, values: list[bytes]
                   ) -> PreparedTxnState:
    """A producer writes ``values`` in a transaction, prepares it and stops."""
    p = Producer(bootstrap_servers=bootstrap, transactional_id=tid,
                 transaction_two_phase_commit_enable=True, **FAST)
    p.init_transactions()
    p.begin_transaction()
    for v in values:
        p.send(topic, v, partition=1)
    state = p.prepare_transaction()
    p.close(0)
    return state


def test_a_prepared_transaction_is_listed_described_and_committed(two_pc, admin):
    topic = _topic(admin)
    tid = f"app-{topic}"
    state = _left_prepared(two_pc.bootstrap, tid, topic, [b"a", b"b"])
    listed = {t.transactional_id: t for t in admin.list_transactions(states=["Ongoing"])}
    assert listed[tid].producer_id == state.producer_id and listed[tid].state == "Ongoing"
    (d,) = admin.describe_transactions([tid])
    assert (d.state, d.producer_id, d.producer_epoch) == ("Ongoing", state.producer_id,
                                                          state.epoch)
    assert d.two_phase and d.partitions == [(topic, 1)] and d.start_time_ms > 0
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 0, 2, timeout=1) == []
    assert admin.complete_prepared_transaction(tid, str(state)) is True
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 2, 2) == [b"a", b"b"]
    (d,) = admin.describe_transactions([tid])
    assert d.state == "CompleteCommit" and d.partitions == []
    assert tid not in {t.transactional_id for t in admin.list_transactions(states=["Ongoing"])}
    # nothing is open any more: a second commit commits nothing
    assert admin.complete_prepared_transaction(tid, str(state)) is False


def test_a_state_that_does_not_match_aborts(two_pc, admin):
    topic = _topic(admin)
    tid = f"app-{topic}"
    state = _left_prepared(two_pc.bootstrap, tid, topic, [b"lost"])
    wrong = PreparedTxnState(state.producer_id, state.epoch + 1)
    assert admin.complete_prepared_transaction(tid, wrong) is False
    (d,) = admin.describe_transactions([tid])
    assert d.state == "CompleteAbort"
    with Producer(bootstrap_servers=two_pc.bootstrap, **FAST) as p:
        p.send(topic, b"after", partition=1).result(10)
    assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 1, 2) == [b"after"]


def test_force_terminate_releases_the_readers_and_fences_the_producer(two_pc, admin):
    topic = _topic(admin)
    tid = f"app-{topic}"
    p = Producer(bootstrap_servers=two_pc.bootstrap, transactional_id=tid,
                 transaction_two_phase_commit_enable=True, **FAST)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"abandoned", partition=1)
        p.prepare_transaction()
        with Producer(bootstrap_servers=two_pc.bootstrap, **FAST) as plain:
            plain.send(topic, b"behind", partition=1).result(10)
        # the open transaction holds back the later record
        assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 0, 2, timeout=1) == []
        admin.force_terminate_transaction(tid)
        assert kcodec_read(two_pc.bootstrap, topic, "read_committed", 1, 2) == [b"behind"]
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()             # the stopped producer's epoch is gone
    finally:
        p.close(0)
    (d,) = admin.describe_transactions([tid])
    assert d.state in ("CompleteAbort", "Empty")
    admin.force_terminate_transaction(tid)     # nothing open: not an error


def test_list_filters(two_pc, admin):
    topic = _topic(admin)
    a, b = f"fa-{topic}", f"fb-{topic}"
    sa = _left_prepared(two_pc.bootstrap, a, topic, [b"x"])
    _left_prepared(two_pc.bootstrap, b, topic, [b"y"])
    assert [t.transactional_id for t in admin.list_transactions(pattern=f"fa-{topic}")] == [a]
    assert [t.transactional_id for t in admin.list_transactions(pattern="f[ab]-" + topic)] \
        == [a, b]
    assert [t.transactional_id for t in admin.list_transactions(
        producer_ids=[sa.producer_id])] == [a]
    assert a in {t.transactional_id for t in admin.list_transactions(min_duration_ms=0)}
    assert a not in {t.transactional_id for t in admin.list_transactions(
        min_duration_ms=3_600_000)}
    assert a not in {t.transactional_id for t in admin.list_transactions(states=["Empty"])}
    with pytest.raises(ValueError, match="unknown transaction states"):
        admin.list_transactions(states=["Prepared"])
    for tid in (a, b):
        admin.force_terminate_transaction(tid)


def test_errors(two_pc, admin):
    with pytest.raises(KafkaError, match="TRANSACTIONAL_ID_NOT_FOUND"):
        admin.describe_transactions([f"never-{uuid.uuid4().hex}"])
    with pytest.raises(ValueError, match="producer id"):
        admin.complete_prepared_transaction("x", "not-a-state")
    with Raw(two_pc.bootstrap) as raw:
        body = raw.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                duration_filter=-1,
                                                transactional_id_pattern="("), 2)
    assert body.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
