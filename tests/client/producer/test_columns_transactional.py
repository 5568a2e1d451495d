"""``send_columns`` inside a transaction: its batches carry the transactional attribute and
join the transaction (an abort hides them from read_committed readers, a commit shows
them), and outside a transaction it is refused as ``send`` is. The columnar batches were
written as plain ones: visible at once, outside the transaction they were sent in."""

from __future__ import annotations

import uuid

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

from kcodec.broker import Cluster  # noqa: E402
from kcodec.client import Admin, Producer, TransactionStateError  # noqa: E402
from tests.support.txn_util import FAST, kcodec_read  # noqa: E402

pytestmark = [pytest.mark.broker]


@pytest.mark.parametrize("level", [2, 1], ids=["v2", "v1"])
def test_columns_join_the_transaction(level):
    with Cluster(transaction_version=level) as c:
        topic = f"t-{uuid.uuid4().hex[:8]}"
        with Admin(bootstrap_servers=c.bootstrap, **FAST) as admin:
            admin.create_topics([topic], num_partitions=1)
        values = pa.array([b"a", b"b", b"c"], pa.binary())
        with Producer(bootstrap_servers=c.bootstrap, transactional_id=f"cols-{topic}",
                      **FAST) as p:
            p.init_transactions()
            with pytest.raises(TransactionStateError):
                p.send_columns(topic, values, partition=pa.array([0, 0, 0], pa.int32()))
            p.begin_transaction()
            p.send_columns(topic, values, partition=pa.array([0, 0, 0], pa.int32()))
            p.flush()
            assert kcodec_read(c.bootstrap, topic, "read_committed", 0, timeout=1) == []
            p.abort_transaction()
            p.begin_transaction()
            p.send_columns(topic, pa.array([b"d"], pa.binary()),
                           partition=pa.array([0], pa.int32()))
            p.commit_transaction()
        assert kcodec_read(c.bootstrap, topic, "read_committed", 1) == [b"d"]
        assert kcodec_read(c.bootstrap, topic, "read_uncommitted", 4) == [b"a", b"b", b"c",
                                                                          b"d"]
