"""InitProducerId: producer ids and epochs for idempotent (and transactional) producers.

v6 (KIP-939): ``enable_2pc`` asks for transactions that never time out (two-phase commit
with an outside coordinator); it needs the cluster's ``transaction.two.phase.commit.enable``,
else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers. ``keep_prepared_txn`` keeps
an open transaction for the new producer to commit or abort, and answers the identity it was
written under (``ongoing_txn_producer_id``/``_epoch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcodec.broker.apis.authz import RT, Op, allowed, any_allowed, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.protocol import ErrorCode, InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []


@api(InitProducerIdRequest, 0, 6)
def init_producer_id(node: Node, req: Incoming[InitProducerIdRequest]
                    ) -> Answer[InitProducerIdResponse]:
    b = req.body
    if b.transactional_id is not None and not allowed(node, req, Op.WRITE, RT.TRANSACTIONAL_ID,
                                                      b.transactional_id):
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    if b.transactional_id is None and not (
            cluster_allowed(node, req, Op.IDEMPOTENT_WRITE, log_denial=False)
            or any_allowed(node, req, Op.WRITE, RT.TOPIC)):
        # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or (KIP-679) WRITE on
        # some topic
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    if b.transactional_id is not None:
        cid = node.cluster.coordinator_for(b.transactional_id)
        if cid != node.id:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if cid is None else ErrorCode.NOT_COORDINATOR
            return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
        known = req.api_version >= 3 and b.producer_id >= 0
        two_phase = req.api_version >= 6 and bool(b.enable2_pc)
        keep = req.api_version >= 6 and bool(b.keep_prepared_txn)
        if two_phase and not node.cluster.transaction_two_phase_commit_enable:
            return InitProducerIdResponse(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                producer_epoch=-1)
        code, pid, epoch, opid, oepoch = node.cluster.txns.init(
            b.transactional_id, b.transaction_timeout_ms, b.producer_id if known else -1,
            b.producer_epoch if known else -1, two_phase=two_phase, keep_prepared=keep)
        if code == ErrorCode.PRODUCER_FENCED and req.api_version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return InitProducerIdResponse(error_code=code, producer_id=pid, producer_epoch=epoch,
                                      ongoing_txn_producer_id=opid,
                                      ongoing_txn_producer_epoch=oepoch)
    pid, epoch = node.cluster.producer_ids.init(
        None, b.producer_id if req.api_version >= 3 else -1,
        b.producer_epoch if req.api_version >= 3 else -1)
    return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=epoch)
