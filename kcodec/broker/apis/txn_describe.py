"""The transaction admin APIs: ListTransactions and DescribeTransactions (KIP-664).

ListTransactions v0-2: the transactional ids this node coordinates, with their producer id
and state, filtered by state names (an unknown name is answered in
``unknown_state_filters``), producer ids, v1's ``duration_filter`` (only transactions
running longer than that many milliseconds) and v2's ``transactional_id_pattern`` (a regular
expression; a bad one is INVALID_REGULAR_EXPRESSION). Ids the caller may not DESCRIBE are
left out, as in Kafka; an admin asks every broker and joins the answers.

DescribeTransactions v0: for each id, its state, timeout, start time, producer id and epoch
and the partitions in the transaction; NOT_COORDINATOR where another node coordinates it,
TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator never saw, and
TRANSACTIONAL_ID_AUTHORIZATION_FAILED without DESCRIBE. A two-phase-commit transaction
(KIP-939) answers the timeout 2147483647: it never times out, and while it is Ongoing it
waits for the outside coordinator to commit or abort it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.state import now_ms
from kcodec.protocol import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ErrorCode,
    ListTransactionsRequest,
    ListTransactionsResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "PrepareEpochFence", "Dead")


@api(ListTransactionsRequest, 0, 2)
def list_transactions(node: Node, req: Incoming[ListTransactionsRequest]
                     ) -> Answer[ListTransactionsResponse]:
    R = ListTransactionsResponse
    b = req.body
    unknown = [s for s in b.state_filters if s not in STATES]
    states = set(b.state_filters) - set(unknown)
    pids = set(b.producer_id_filters)
    duration = b.duration_filter if req.api_version >= 1 else -1
    pattern = b.transactional_id_pattern if req.api_version >= 2 else None
    rx = None
    if pattern:
        try:
            rx = re.compile(pattern)
        except re.error:
            return R(error_code=E.INVALID_REGULAR_EXPRESSION, unknown_state_filters=[],
                     transaction_states=[])
    now = now_ms()
    rows = []
    for t in node.cluster.txns.views():
        if node.cluster.coordinator_for(t.transactional_id) != node.id:
            continue
        if b.state_filters and t.state not in states:
            continue
        if pids and t.producer_id not in pids:
            continue
        if duration >= 0 and (t.state != "Ongoing" or now - t.started_ms <= duration):
            continue
        if rx is not None and not rx.fullmatch(t.transactional_id):
            continue
        rows.append(t)
    may = allowed_names(node, req, Op.DESCRIBE, RT.TRANSACTIONAL_ID,
                        (t.transactional_id for t in rows), log_denial=False)
    return R(error_code=0, unknown_state_filters=unknown, transaction_states=[
        R.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                           transaction_state=t.state)
        for t in rows if t.transactional_id in may])


@api(DescribeTransactionsRequest, 0, 0)
def describe_transactions(node: Node, req: Incoming[DescribeTransactionsRequest]
                         ) -> Answer[DescribeTransactionsResponse]:
    R = DescribeTransactionsResponse
    out = []
    for tid in req.body.transactional_ids:
        code = 0
        t = None
        if not allowed(node, req, Op.DESCRIBE, RT.TRANSACTIONAL_ID, tid):
            code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            cid = node.cluster.coordinator_for(tid)
            if cid != node.id:
                code = E.COORDINATOR_NOT_AVAILABLE if cid is None else E.NOT_COORDINATOR
            else:
                t = node.cluster.txns.view(tid)
                code = 0 if t is not None else E.TRANSACTIONAL_ID_NOT_FOUND
        if t is None:
            out.append(R.TransactionState(error_code=code, transactional_id=tid,
                                          transaction_state="", transaction_timeout_ms=0,
                                          transaction_start_time_ms=-1, producer_id=-1,
                                          producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(index)
        out.append(R.TransactionState(
            error_code=0, transactional_id=tid, transaction_state=t.state,
            transaction_timeout_ms=t.timeout_ms,
            transaction_start_time_ms=t.started_ms if t.state != "Empty" else -1,
            producer_id=t.producer_id, producer_epoch=t.epoch,
            topics=[R.TopicData(topic=k, partitions=v) for k, v in by_topic.items()]))
    return R(transaction_states=out)
