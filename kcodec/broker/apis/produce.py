"""Produce: validate, check producer sequences, append as received, answer per partition.

Per partition, under its lock: the leader check; a cheap header walk of the batches
(``peek_batches``) for the idempotence check (:class:`ProducerState`); the append (the log
validates CRCs and sizes and assigns offsets in place); the producer state update; then the
fetches waiting on the partition are woken. acks=0 gets no answer; acks=1 and acks=-1 (all)
are the same here, the replicas sharing the leader's log (the high watermark moves with the
append), except that acks=-1 needs ``min.insync.replicas`` replicas on running nodes.

A batch that repeats one of the last five a producer wrote (same epoch, same first and last
sequence: a retry after a lost answer) is not written again and is answered as Kafka answers
it: NONE with the original batch's base offset (and its append time on a LogAppendTime
topic), so the producer learns where its records are.

Transactions v2 (KIP-890, the cluster's ``transaction.version`` 2): a transactional batch in
a Produce v12+ adds its partition to the producer's transaction first (the coordinator's
``add_implicit``), where a first-generation producer sent AddPartitionsToTxn; an epoch the
coordinator has moved past is INVALID_PRODUCER_EPOCH (a zombie's late batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.apis.util import leader_error
from kcodec.broker.coordinator.producers import SequenceError
from kcodec.broker.log import LogError, peek_batches
from kcodec.broker.network.channel import CLOSE, NO_RESPONSE
from kcodec.broker.state import now_ms
from kcodec.errors import KcodecError
from kcodec.protocol import ErrorCode, ProduceRequest, ProduceResponse
from kcodec.records import iter_batches

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__ = ["append_records"]

P = ProduceResponse


def append_records(node: Any, topic: str, index: int, records: Any,
                   implicit_txn: str | None = None, acks: int = 1) -> Any:
    """Append to one partition; the PartitionProduceResponse. ``implicit_txn``: the
    transactional id whose transaction a transactional batch joins (transactions v2)."""
    code, part = leader_error(node, topic, index)
    if part is None:
        return P.PartitionProduceResponse(index=index, error_code=code, base_offset=-1)
    min_isr = part.log.config.min_insync_replicas
    if acks == -1 and min_isr > 1:
        # the replicas share the log: the in-sync ones are those on running nodes
        isr = len(part.isr(node.cluster.alive_ids()))
        if isr < min_isr:
            return P.PartitionProduceResponse(
                index=index, error_code=ErrorCode.NOT_ENOUGH_REPLICAS, base_offset=-1,
                error_message=f"the in-sync replicas of {topic}-{index} ({isr}) are fewer "
                              f"than its min.insync.replicas ({min_isr}), which acks=all needs")
    if not records:
        return P.PartitionProduceResponse(index=index, error_code=ErrorCode.CORRUPT_MESSAGE,
                                          base_offset=-1, error_message="no records")
    cluster = node.cluster
    if implicit_txn is not None:
        # before the partition lock: the coordinator takes partition locks for markers
        code = _join_transaction(cluster, implicit_txn, topic, index, records)
        if code:
            return P.PartitionProduceResponse(
                index=index, error_code=code, base_offset=-1,
                error_message=f"transactional id {implicit_txn!r}: {ErrorCode(code).name}")
    log = part.log
    try:
        with part.lock:
            batches = peek_batches(records)
            fenced = None
            for b in batches:
                if b[2] >= 0:
                    fenced = cluster.producer_ids.current_epoch(b[2])
                    break
            dup = part.producers.check(batches, fenced)
            if dup is not None:
                return P.PartitionProduceResponse(
                    index=index, error_code=0, base_offset=dup,
                    log_append_time_ms=_append_time(log, dup),
                    log_start_offset=log.log_start_offset)
            result = log.append(records, now_ms=now_ms(), leader_epoch=part.leader_epoch)
            part.producers.update(result.batches)
            if any(b.is_transactional for b in result.batches):
                cluster.txns.partition(topic, index).on_append(result.batches)
    except SequenceError as exc:
        return P.PartitionProduceResponse(index=index, error_code=exc.error_code, base_offset=-1,
                                          error_message=str(exc))
    except LogError as exc:
        errs = []
        if exc.record_errors:
            errs = [P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                    for i, m in exc.record_errors]
        elif exc.batch_index is not None:
            errs = [P.BatchIndexAndErrorMessage(batch_index=exc.batch_index,
                                                batch_index_error_message=str(exc))]
        return P.PartitionProduceResponse(index=index, error_code=exc.error_code, base_offset=-1,
                                          record_errors=errs, error_message=str(exc))
    except KcodecError as exc:
        return P.PartitionProduceResponse(index=index, error_code=ErrorCode.CORRUPT_MESSAGE,
                                          base_offset=-1, error_message=str(exc))
    cluster.purgatory.notify((topic, index))
    node.metrics.appended(topic, index, result.record_count, len(records))
    return P.PartitionProduceResponse(index=index, error_code=0, base_offset=result.base_offset,
                                      log_append_time_ms=result.log_append_time_ms,
                                      log_start_offset=log.log_start_offset)


def _join_transaction(cluster: Any, transactional_id: str, topic: str, index: int,
                      records: Any) -> int:
    """Add (topic, index) to the transaction of the first transactional batch's producer;
    0, or the error the partition answers."""
    try:
        batches = peek_batches(records)
    except (LogError, KcodecError):
        return 0            # the append reports broken framing
    first = next((b for b in batches if b.is_transactional and b.producer_id >= 0), None)
    if first is None:
        return 0
    code = cluster.txns.add_implicit(transactional_id, first.producer_id, first.producer_epoch,
                                     topic, index)
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _append_time(log: Any, offset: int) -> int:
    """The append time the batch at ``offset`` got, on a LogAppendTime topic (its max
    timestamp); -1 otherwise, or when the batch is gone (retention)."""
    if not log.config.log_append_time:
        return -1
    try:
        data = log.read(offset, 1, min_one=True)
        batch = next(iter_batches(data, validate_crc=False), None)
    except (LogError, KcodecError):
        return -1
    return -1 if batch is None else batch.max_timestamp


def _failed(t: Any, code: int) -> Any:
    return P.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
        P.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
        for p in t.partition_data])


def _transactional(body: Any) -> bool:
    """Does any partition's first batch say it is transactional? (Broken framing is
    answered per partition later.)"""
    for t in body.topic_data:
        for p in t.partition_data:
            try:
                batches = peek_batches(p.records) if p.records else []
            except (LogError, KcodecError):
                continue
            if batches and batches[0].is_transactional:
                return True
    return False


@api(ProduceRequest, 0, 13)
def produce(node: Node, req: Incoming[ProduceRequest]) -> Answer[ProduceResponse]:
    body = req.body
    if body.acks not in (0, 1, -1):
        return P(responses=[_failed(t, ErrorCode.INVALID_REQUIRED_ACKS) for t in body.topic_data])
    if node.cluster.authorizer is not None and _transactional(body) and (
            body.transactional_id is None
            or not allowed(node, req, Op.WRITE, RT.TRANSACTIONAL_ID, body.transactional_id)):
        if body.acks == 0:
            return CLOSE     # Kafka hangs up on an acks=0 producer whose write failed
        return P(responses=[_failed(t, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                            for t in body.topic_data])
    names: dict[Any, str] = {}
    if req.api_version >= 13:      # topics named by id (KIP-516)
        names = {topic.topic_id: name for name, topic in list(node.cluster.state.topics.items())}

    def name_of(t: Any) -> str | None:
        return t.name if req.api_version < 13 else names.get(t.topic_id)
    writable = allowed_names(node, req, Op.WRITE, RT.TOPIC, (name_of(t) for t in body.topic_data))
    # transactions v2: Produce v12+ of a transactional producer adds its partitions itself
    implicit = body.transactional_id if (
        req.api_version >= 12 and body.transactional_id is not None
        and node.cluster.transaction_version >= 2) else None
    out = []
    refused = False
    for t in body.topic_data:
        name = name_of(t)
        if name is None:
            out.append(_failed(t, ErrorCode.UNKNOWN_TOPIC_ID))
            continue
        if name not in writable:
            refused = True
            failed = _failed(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            failed.name = name
            out.append(failed)
            continue
        out.append(P.TopicProduceResponse(name=name, topic_id=t.topic_id, partition_responses=[
            append_records(node, name, p.index, p.records, implicit, body.acks)
            for p in t.partition_data]))
    if body.acks == 0:
        # nothing to answer; but one that may not write is told by a hang-up, as Kafka does
        return CLOSE if refused else NO_RESPONSE
    return P(responses=out)
