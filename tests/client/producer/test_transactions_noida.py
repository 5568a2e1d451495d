"""The transactional producer end to end against noida-db, a broker whose read_committed
fetches hide aborted transactions: kcodec's and confluent-kafka's read_committed consumers
must agree on exactly the committed records, also when a consume-transform-produce loop is
killed at random points."""

from __future__ import annotations

import uuid

import pytest

from kcodec.client import Admin, Producer
from tests.support.txn_util import FAST, confluent_read, consume_transform_produce, kcodec_read

pytestmark = [pytest.mark.broker, pytest.mark.peers]


@pytest.fixture(scope="module")
def noida():
    from kcodec.testing.noida import Noida, noida_binary

    if noida_binary() is None:
        pytest.skip("noida-db is not installed (the test extra installs it on x86-64 Linux)")
    with Noida() as n:
        yield n.bootstrap


def test_read_committed_hides_aborted_transactions(noida):
    topic = f"rc-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=noida, **FAST) as admin:
        admin.create_topics([topic], num_partitions=1)
    with Producer(bootstrap_servers=noida, transactional_id=f"rc-{topic}", **FAST) as p:
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
    assert kcodec_read(noida, topic, "read_committed", 4) == committed
    assert confluent_read(noida, topic, 4) == committed
    assert kcodec_read(noida, topic, "read_uncommitted", 7) == \
        [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"d0"]


def test_consume_transform_produce_killed_at_random_points(noida):
    """Each round consumes a little, produces the transformed records and the offsets in
    one transaction, and is killed (producer and consumer dropped without commit or
    close) at a random point. A restarted producer with the same transactional_id fences
    the dead one's transaction. At the end the read_committed output is exactly one
    transformed copy of every input record: no duplicate, nothing lost."""
    src, dst = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    n = 60
    with Admin(bootstrap_servers=noida, **FAST) as admin:
        admin.create_topics([src, dst], num_partitions=1)
    with Producer(bootstrap_servers=noida, **FAST) as p:
        for i in range(n):
            p.send(src, f"{i}".encode(), partition=0)
    done, kills = consume_transform_produce(noida, src, dst, seed=1234, kill_mid_send=0.04,
                                            kill_before_commit=0.15, max_poll_records=7,
                                            poll_s=0.5, idle_polls=4, budget_s=90)
    assert done and kills >= 2
    expected = [b"x" + f"{i}".encode() for i in range(n)]
    assert kcodec_read(noida, dst, "read_committed", n) == expected
    assert confluent_read(noida, dst, n) == expected
