"""A retried idempotent batch (its first answer lost) is answered as Kafka answers it: NONE
with the original batch's offset, nothing written twice. Kafka keeps the last five batches
of each producer per partition for this; an older one is out of order."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kcodec.broker import LOSE_ANSWER, Cluster
from kcodec.protocol import ErrorCode as E
from kcodec.protocol import InitProducerIdRequest, ProduceRequest
from kcodec.records import RecordBatchBuilder, iter_batches
from tests.support.broker_raw import Raw


def batch(values, pid, epoch, seq, ts=None):
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for v in values:
        b.append(None, v, [], ts if ts is not None else int(time.time() * 1000))
    return b.build()


def produce(raw, topic, records):
    P = ProduceRequest
    r = raw.call(P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
        P.PartitionProduceData(index=0, records=records)])]), 9)
    return r.responses[0].partition_responses[0]


def idempotent(raw):
    r = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def log_values(cluster, topic):
    log = cluster.state.topics[topic].partitions[0].log
    return [r.value for b in iter_batches(log.read(0, 1 << 30)) for r in b]


def test_a_duplicate_of_any_of_the_last_five_batches_gets_its_original_offset():
    with Cluster(1) as c:
        c.create_topic("t", 1)
        with Raw(c.bootstrap) as raw:
            pid, ep = idempotent(raw)
            sent = [batch([b"%d-%d" % (i, j) for j in range(2)], pid, ep, 2 * i) for i in range(6)]
            offsets = [produce(raw, "t", b).base_offset for b in sent]
            assert offsets == [0, 2, 4, 6, 8, 10]
            for i in range(1, 6):                       # the last five: answered, not written
                r = produce(raw, "t", sent[i])
                assert (r.error_code, r.base_offset) == (0, offsets[i])
                assert r.log_append_time_ms == -1       # a CreateTime topic
            oldest = produce(raw, "t", sent[0])         # the sixth back is forgotten
            assert oldest.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(raw, "t", batch([b"next"], pid, ep, 12)).base_offset == 12
        assert len(log_values(c, "t")) == 13


def test_a_duplicate_on_a_log_append_time_topic_gets_the_original_append_time():
    with Cluster(1) as c:
        c.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
        with Raw(c.bootstrap) as raw:
            pid, ep = idempotent(raw)
            first = produce(raw, "t", batch([b"a"], pid, ep, 0, ts=1000))
            assert first.log_append_time_ms > 1000
            time.sleep(0.02)
            again = produce(raw, "t", batch([b"a"], pid, ep, 0, ts=1000))
            assert (again.error_code, again.base_offset) == (0, 0)
            assert again.log_append_time_ms == first.log_append_time_ms


def test_a_duplicate_of_another_epoch_or_range_is_not_one():
    with Cluster(1) as c:
        c.create_topic("t", 1)
        with Raw(c.bootstrap) as raw:
            pid, ep = idempotent(raw)
            assert produce(raw, "t", batch([b"a", b"b"], pid, ep, 0)).base_offset == 0
            # same first sequence, another last one: not the batch written
            r = produce(raw, "t", batch([b"a"], pid, ep, 0))
            assert r.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert log_values(c, "t") == [b"a", b"b"]


def _lose_first_answer(cluster) -> list[int]:
    """Lose the answer to the first Produce (written, then the connection dropped)."""
    lost = []
    lock = threading.Lock()

    def hook(req):
        with lock:
            if not lost:
                lost.append(req.correlation_id)
                return LOSE_ANSWER
        return None
    cluster.hook("Produce", hook)
    return lost


def test_kcodec_producer_retry_after_a_lost_answer_reports_the_original_offset():
    from kcodec.client import Producer

    with Cluster(1) as c:
        c.create_topic("t", 1)
        lost = _lose_first_answer(c)
        with Producer(bootstrap_servers=c.bootstrap, enable_idempotence=True, acks="all",
                      linger_ms=0, retry_backoff_ms=50, request_timeout_ms=5000) as p:
            meta = p.send("t", b"once", partition=0).result(20)
            later = p.send("t", b"then", partition=0).result(20)
        assert lost                                   # the first answer was lost
        assert (meta.offset, later.offset) == (0, 1)
        assert log_values(c, "t") == [b"once", b"then"]


@pytest.mark.peers
def test_confluent_idempotent_producer_retry_after_a_lost_answer_gets_the_original_offset():
    """(librdkafka also took the old DUPLICATE_SEQUENCE_NUMBER answer's offset; Kafka's
    answer must keep working for it.)"""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with Cluster(1) as c:
        topic = f"d-{uuid.uuid4().hex[:8]}"
        c.create_topic(topic, 1)
        lost = _lose_first_answer(c)
        p = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True,
                                      "acks": "all", "linger.ms": 0, "retry.backoff.ms": 50})
        reports: list[tuple] = []
        p.produce(topic, b"once", partition=0,
                  on_delivery=lambda err, m: reports.append((err, m.offset())))
        assert p.flush(20) == 0
        p.produce(topic, b"then", partition=0,
                  on_delivery=lambda err, m: reports.append((err, m.offset())))
        assert p.flush(20) == 0
        assert lost
        assert reports == [(None, 0), (None, 1)]
        assert log_values(c, topic) == [b"once", b"then"]
