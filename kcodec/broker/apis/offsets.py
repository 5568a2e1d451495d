"""ListOffsets (earliest, latest, max timestamp, by timestamp), OffsetForLeaderEpoch and
DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed_names, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.apis.util import leader_error
from kcodec.broker.log import LogError
from kcodec.protocol import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ErrorCode,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def _list_one(node: Any, topic: str, index: int, ts: int, epoch: int,
              read_committed: bool = False) -> Any:
    R = ListOffsetsResponse.ListOffsetsPartitionResponse
    code, p = leader_error(node, topic, index)
    if p is None:
        return R(partition_index=index, error_code=code)
    if epoch >= 0 and epoch != p.leader_epoch:
        return R(partition_index=index, error_code=ErrorCode.FENCED_LEADER_EPOCH
                 if epoch < p.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH)
    log = p.log
    found: tuple[int, int] | None
    if ts in (EARLIEST, EARLIEST_LOCAL):
        found = (log.log_start_offset, -1)
    elif ts in (LATEST, LATEST_TIERED):
        hw = log.high_watermark
        found = (node.cluster.txns.stable_offset(topic, index, hw) if read_committed else hw, -1)
    elif ts == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    elif ts >= 0:
        found = log.offset_for_timestamp(ts)
    else:
        return R(partition_index=index, error_code=ErrorCode.UNSUPPORTED_VERSION)
    if found is None:
        return R(partition_index=index, error_code=0, offset=-1, timestamp=-1, leader_epoch=-1,
                 old_style_offsets=[])
    return R(partition_index=index, error_code=0, offset=found[0], timestamp=found[1],
             leader_epoch=p.leader_epoch, old_style_offsets=[found[0]])


@api(ListOffsetsRequest, 0, 9)
def list_offsets(node: Node, req: Incoming[ListOffsetsRequest]) -> Answer[ListOffsetsResponse]:
    L = ListOffsetsResponse
    R = L.ListOffsetsPartitionResponse
    ok = allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, (t.name for t in req.body.topics))
    return L(topics=[L.ListOffsetsTopicResponse(name=t.name, partitions=[
        _list_one(node, t.name, p.partition_index, p.timestamp, p.current_leader_epoch,
                  req.api_version >= 2 and req.body.isolation_level == 1)
        if t.name in ok else R(partition_index=p.partition_index,
                               error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]) for t in req.body.topics])


@api(OffsetForLeaderEpochRequest, 0, 4)
def offset_for_leader_epoch(node: Node, req: Incoming[OffsetForLeaderEpochRequest]
                           ) -> Answer[OffsetForLeaderEpochResponse]:
    R = OffsetForLeaderEpochResponse
    names = [t.topic for t in req.body.topics]
    ok = set(names) if cluster_allowed(node, req, Op.CLUSTER_ACTION, log_denial=False) else \
        allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, names)
    out = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            if t.topic not in ok:
                parts.append(R.EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                              partition=p.partition))
                continue
            code, part = leader_error(node, t.topic, p.partition)
            if part is None:
                parts.append(R.EpochEndOffset(error_code=code, partition=p.partition))
            elif p.current_leader_epoch >= 0 and p.current_leader_epoch != part.leader_epoch:
                parts.append(R.EpochEndOffset(
                    error_code=ErrorCode.FENCED_LEADER_EPOCH if p.current_leader_epoch < part.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH, partition=p.partition))
            else:
                # the log knows where each epoch ends (from the batches' leader epochs)
                epoch, end = part.log.end_offset_for_epoch(p.leader_epoch)
                parts.append(R.EpochEndOffset(error_code=0, partition=p.partition,
                                              leader_epoch=epoch, end_offset=end))
        out.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return R(topics=out)


@api(DeleteRecordsRequest, 0, 2)
def delete_records(node: Node, req: Incoming[DeleteRecordsRequest]
                  ) -> Answer[DeleteRecordsResponse]:
    D = DeleteRecordsResponse
    ok = allowed_names(node, req, Op.DELETE, RT.TOPIC, (t.name for t in req.body.topics))
    out = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            code, part = leader_error(node, t.name, p.partition_index)
            if t.name not in ok:
                code, part = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
            low = -1
            if part is not None:
                try:
                    with part.lock:
                        target = part.log.high_watermark if p.offset == -1 else p.offset
                        if target > part.log.high_watermark or target < 0:
                            raise_code = ErrorCode.OFFSET_OUT_OF_RANGE
                            code = raise_code
                        else:
                            low = part.log.delete_records_before(target)
                except LogError as exc:
                    code = exc.error_code
            parts.append(D.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                        low_watermark=low, error_code=code))
        out.append(D.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return D(topics=out)
