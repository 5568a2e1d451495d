"""The transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, and
WriteTxnMarkers.

The first four check that this node coordinates the transactional id (or, for
TxnOffsetCommit, the group) and hand over to
:class:`kcodec.broker.coordinator.txn.TxnCoordinator`. InitProducerId (apis/producers.py) calls
the coordinator for a transactional id.

WriteTxnMarkers is the partition leader's side: Kafka's coordinator sends it to the leaders,
and admin tools (``kafka-transactions.sh abort``) send it to end a hanging transaction. Each
partition this node leads gets the COMMIT or ABORT marker of the producer (last stable offset
and aborted index updated, :func:`~kcodec.broker.coordinator.txn.write_marker`); the others
answer NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from kcodec.broker.apis.registry import api
from kcodec.broker.apis.util import leader_error
from kcodec.broker.coordinator.txn import write_marker
from kcodec.protocol import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    ErrorCode,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
)

__all__: list[str] = []

E = ErrorCode


def _not_coordinator(node: Any, key: str) -> int:
    cid = node.cluster.coordinator_for(key)
    if cid is None:
        return E.COORDINATOR_NOT_AVAILABLE
    return 0 if cid == node.id else E.NOT_COORDINATOR


def _fenced(code: int, version: int, first_fenced_version: int) -> int:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for older request versions, as in Kafka."""
    if code == E.PRODUCER_FENCED and version < first_fenced_version:
        return E.INVALID_PRODUCER_EPOCH
    return code


@api(24, 0, 3)
def add_partitions_to_txn(node: Any, req: Any) -> Any:
    R = AddPartitionsToTxnResponse
    b = req.body
    wanted = [(t.name, p) for t in b.v3_and_below_topics for p in t.partitions]
    code = _not_coordinator(node, b.v3_and_below_transactional_id)
    if code:
        results = {tp: code for tp in wanted}
    else:
        results = node.cluster.txns.add_partitions(
            b.v3_and_below_transactional_id, b.v3_and_below_producer_id,
            b.v3_and_below_producer_epoch, wanted)
    return R(results_by_topic_v3_and_below=[R.AddPartitionsToTxnTopicResult(
        name=t.name, results_by_partition=[R.AddPartitionsToTxnPartitionResult(
            partition_index=p,
            partition_error_code=_fenced(results[(t.name, p)], req.api_version, 2))
            for p in t.partitions]) for t in b.v3_and_below_topics])


@api(25, 0, 3)
def add_offsets_to_txn(node: Any, req: Any) -> Any:
    b = req.body
    code = _not_coordinator(node, b.transactional_id)
    if not code:
        code = node.cluster.txns.add_offsets(b.transactional_id, b.producer_id,
                                             b.producer_epoch, b.group_id)
    return AddOffsetsToTxnResponse(error_code=_fenced(code, req.api_version, 2))


@api(26, 0, 3)
def end_txn(node: Any, req: Any) -> Any:
    b = req.body
    code = _not_coordinator(node, b.transactional_id)
    if not code:
        code = node.cluster.txns.end(b.transactional_id, b.producer_id, b.producer_epoch,
                                     bool(b.committed))
    return EndTxnResponse(error_code=_fenced(code, req.api_version, 2))


@api(28, 0, 3)
def txn_offset_commit(node: Any, req: Any) -> Any:
    R = TxnOffsetCommitResponse
    b = req.body
    state = node.cluster.state
    code = _not_coordinator(node, b.group_id)
    offsets = [(t.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if req.api_version >= 2 else -1, p.committed_metadata)
               for t in b.topics for p in t.partitions
               if state.partition(t.name, p.partition_index) is not None]
    if not code:
        code = node.cluster.txns.txn_offset_commit(b.transactional_id, b.group_id,
                                                   b.producer_id, b.producer_epoch, offsets)
        code = _fenced(code, req.api_version, 3)
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=code or (0 if state.partition(t.name, p.partition_index) is not None
                                else E.UNKNOWN_TOPIC_OR_PARTITION))
        for p in t.partitions]) for t in b.topics])


@api(27, 1, 2)
def write_txn_markers(node: Any, req: Any) -> Any:
    R = WriteTxnMarkersResponse
    out = []
    for m in req.body.markers:
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                code, part = leader_error(node, t.name, index)
                if part is not None:
                    code = write_marker(node.cluster, t.name, index, m.producer_id,
                                        m.producer_epoch, bool(m.transaction_result))
                parts.append(R.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                error_code=code))
            topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        out.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return R(markers=out)
