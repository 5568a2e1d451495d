"""The transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, and
WriteTxnMarkers.

The first four check that this node coordinates the transactional id (or, for
TxnOffsetCommit, the group) and hand over to
:class:`kcodec.broker.coordinator.txn.TxnCoordinator`. InitProducerId (apis/producers.py) calls
the coordinator for a transactional id.

Both protocol generations are served (KIP-890): with the cluster's ``transaction.version``
at 2, EndTxn v5 ends a transaction with an epoch bump and answers the new producer id and
epoch, TxnOffsetCommit v5 adds its group to the transaction itself (no AddOffsetsToTxn), and
Produce v12+ adds partitions (apis/produce.py); AddPartitionsToTxn v4+ is the batched form
brokers send (several transactions, ``verify_only`` to ask whether partitions are in one),
which needs CLUSTER_ACTION, as in Kafka. Clients of the first generation (AddPartitionsToTxn
v0-3, EndTxn v0-4) are served unchanged.

WriteTxnMarkers is the partition leader's side: Kafka's coordinator sends it to the leaders,
and admin tools (``kafka-transactions.sh abort``) send it to end a hanging transaction. Each
partition this node leads gets the COMMIT or ABORT marker of the producer (last stable offset
and aborted index updated, :func:`~kcodec.broker.coordinator.txn.write_marker`); the others
answer NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.apis.util import leader_error
from kcodec.broker.coordinator.txn import write_marker
from kcodec.protocol import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    ErrorCode,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode


def _not_coordinator(node: Any, key: str) -> int:
    cid = node.cluster.coordinator_for(key)
    if cid is None:
        return E.COORDINATOR_NOT_AVAILABLE
    return 0 if cid == node.id else E.NOT_COORDINATOR


def _may_write(node: Any, req: Any, transactional_id: str) -> int:
    """0, or TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE on the transactional id."""
    ok = allowed(node, req, Op.WRITE, RT.TRANSACTIONAL_ID, transactional_id)
    return 0 if ok else E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _fenced(code: int, version: int, first_fenced_version: int) -> int:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for older request versions, as in Kafka."""
    if code == E.PRODUCER_FENCED and version < first_fenced_version:
        return E.INVALID_PRODUCER_EPOCH
    return code


def _tv2(node: Any) -> bool:
    """Is the cluster's transaction.version 2 (transactions v2, KIP-890)?"""
    return node.cluster.transaction_version >= 2


@api(AddPartitionsToTxnRequest, 0, 5)
def add_partitions_to_txn(node: Node, req: Incoming[AddPartitionsToTxnRequest]
                         ) -> Answer[AddPartitionsToTxnResponse]:
    R = AddPartitionsToTxnResponse
    b = req.body
    if req.api_version >= 4:
        return _add_partitions_batched(node, req)
    wanted = [(t.name, p) for t in b.v3_and_below_topics for p in t.partitions]
    results = _add(node, req, b.v3_and_below_transactional_id, b.v3_and_below_producer_id,
                   b.v3_and_below_producer_epoch, wanted, False)
    return R(results_by_topic_v3_and_below=_topic_results(
        b.v3_and_below_topics, results, req.api_version))


def _add(node: Any, req: Any, tid: str, pid: int, epoch: int, wanted: list[tuple[str, int]],
         verify_only: bool) -> dict[tuple[str, int], int]:
    code = _may_write(node, req, tid) or _not_coordinator(node, tid)
    writable = allowed_names(node, req, Op.WRITE, RT.TOPIC, (t for t, _ in wanted))
    if code:
        return {tp: code for tp in wanted}
    if any(t not in writable for t, _ in wanted):
        # nothing is added: the topics it may not write say so, the others were not tried
        return {(t, p): E.TOPIC_AUTHORIZATION_FAILED if t not in writable
                else E.OPERATION_NOT_ATTEMPTED for t, p in wanted}
    if verify_only:
        return node.cluster.txns.verify_partitions(tid, pid, epoch, wanted)
    return node.cluster.txns.add_partitions(tid, pid, epoch, wanted)


def _topic_results(topics: Any, results: dict, version: int) -> list:
    R = AddPartitionsToTxnResponse
    return [R.AddPartitionsToTxnTopicResult(
        name=t.name, results_by_partition=[R.AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=_fenced(results[(t.name, p)], version, 2))
            for p in t.partitions]) for t in topics]


def _add_partitions_batched(node: Any, req: Any) -> Any:
    """v4+: several transactions at once, as brokers send it (CLUSTER_ACTION needed)."""
    R = AddPartitionsToTxnResponse
    if not cluster_allowed(node, req, Op.CLUSTER_ACTION):
        return R(error_code=E.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
    out = []
    for txn in req.body.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        results = _add(node, req, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                       wanted, bool(txn.verify_only))
        out.append(R.AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id,
            topic_results=_topic_results(txn.topics, results, req.api_version)))
    return R(error_code=0, results_by_transaction=out)


@api(AddOffsetsToTxnRequest, 0, 4)
def add_offsets_to_txn(node: Node, req: Incoming[AddOffsetsToTxnRequest]
                      ) -> Answer[AddOffsetsToTxnResponse]:
    b = req.body
    code = _may_write(node, req, b.transactional_id)
    if not code and not allowed(node, req, Op.READ, RT.GROUP, b.group_id):
        code = E.GROUP_AUTHORIZATION_FAILED
    code = code or _not_coordinator(node, b.transactional_id)
    if not code:
        code = node.cluster.txns.add_offsets(b.transactional_id, b.producer_id,
                                             b.producer_epoch, b.group_id)
    return AddOffsetsToTxnResponse(error_code=_fenced(code, req.api_version, 2))


@api(EndTxnRequest, 0, 5)
def end_txn(node: Node, req: Incoming[EndTxnRequest]) -> Answer[EndTxnResponse]:
    b = req.body
    code = _may_write(node, req, b.transactional_id) or _not_coordinator(node, b.transactional_id)
    pid, epoch = -1, -1
    if not code:
        # v5 with transactions v2: the epoch is bumped and the new identity answered
        code, pid, epoch = node.cluster.txns.end(
            b.transactional_id, b.producer_id, b.producer_epoch, bool(b.committed),
            v2=req.api_version >= 5 and _tv2(node))
    return EndTxnResponse(error_code=_fenced(code, req.api_version, 2),
                          producer_id=pid if not code else -1,
                          producer_epoch=epoch if not code else -1)


@api(TxnOffsetCommitRequest, 0, 5)
def txn_offset_commit(node: Node, req: Incoming[TxnOffsetCommitRequest]
                     ) -> Answer[TxnOffsetCommitResponse]:
    R = TxnOffsetCommitResponse
    b = req.body
    state = node.cluster.state
    code = _may_write(node, req, b.transactional_id)
    if not code and not allowed(node, req, Op.READ, RT.GROUP, b.group_id):
        code = E.GROUP_AUTHORIZATION_FAILED
    code = code or _not_coordinator(node, b.group_id)
    readable = allowed_names(node, req, Op.READ, RT.TOPIC, (t.name for t in b.topics))
    offsets = [(t.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if req.api_version >= 2 else -1, p.committed_metadata)
               for t in b.topics for p in t.partitions
               if t.name in readable and state.partition(t.name, p.partition_index) is not None]
    if not code and req.api_version >= 5 and _tv2(node):
        # v5, transactions v2: the group joins the transaction here (no AddOffsetsToTxn)
        code = node.cluster.txns.add_offsets(b.transactional_id, b.producer_id,
                                             b.producer_epoch, b.group_id, v2=True)
    if not code:
        code = node.cluster.txns.txn_offset_commit(b.transactional_id, b.group_id,
                                                   b.producer_id, b.producer_epoch, offsets)
    code = _fenced(code, req.api_version, 3)
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=code or (E.TOPIC_AUTHORIZATION_FAILED if t.name not in readable else
                                0 if state.partition(t.name, p.partition_index) is not None
                                else E.UNKNOWN_TOPIC_OR_PARTITION))
        for p in t.partitions]) for t in b.topics])


@api(WriteTxnMarkersRequest, 1, 2)
def write_txn_markers(node: Node, req: Incoming[WriteTxnMarkersRequest]
                     ) -> Answer[WriteTxnMarkersResponse]:
    R = WriteTxnMarkersResponse
    may = cluster_allowed(node, req, Op.CLUSTER_ACTION)
    out = []
    for m in req.body.markers:
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                code, part = leader_error(node, t.name, index)
                if not may:
                    code, part = E.CLUSTER_AUTHORIZATION_FAILED, None
                if part is not None:
                    code = write_marker(node.cluster, t.name, index, m.producer_id,
                                        m.producer_epoch, bool(m.transaction_result))
                parts.append(R.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                error_code=code))
            topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        out.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return R(markers=out)
