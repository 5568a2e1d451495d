"""The consumer-protocol group APIs (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe.

The work is done by :class:`~kcodec.broker.coordinator.consumer_group.ConsumerGroupCoordinator`;
a joining member converts a classic group with members into a consumer group when the
migration policy allows (:mod:`kcodec.broker.coordinator.migration`), else the group id
answers GROUP_ID_NOT_FOUND here.

Mixed groups: the ``mixed_*`` functions answer JoinGroup, SyncGroup, Heartbeat and
LeaveGroup for classic members of a group that consumer-protocol members created (the
classic handlers call them first; ``None`` means "not a mixed-group request").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names, operations
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.errors import KcodecError
from kcodec.protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerProtocolAssignment,
    ErrorCode,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from kcodec.protocol.consumer import (
    ConsumerProtocolSubscription,
    decode_versioned,
    encode_versioned,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode
HB = ConsumerGroupHeartbeatResponse
DESC = ConsumerGroupDescribeResponse


def _not_coordinator(node: Any, group_id: str) -> int:
    cid = node.cluster.coordinator_for(group_id)
    if cid is None:
        return E.COORDINATOR_NOT_AVAILABLE
    return 0 if cid == node.id else E.NOT_COORDINATOR


def _classic_in_use(node: Any, group_id: str) -> bool:
    with node.cluster.groups.lock:
        g = node.cluster.groups.groups.get(group_id)
        return g is not None and bool(g.members)


@api(ConsumerGroupHeartbeatRequest, 0, 1)
def consumer_group_heartbeat(node: Node, req: Incoming[ConsumerGroupHeartbeatRequest]
                            ) -> Answer[ConsumerGroupHeartbeatResponse]:
    b = req.body
    coord = node.cluster.consumer_groups
    if not allowed(node, req, Op.READ, RT.GROUP, b.group_id):
        return HB(error_code=E.GROUP_AUTHORIZATION_FAILED, member_epoch=b.member_epoch,
                  heartbeat_interval_ms=0)
    if b.subscribed_topic_names:
        # Kafka: a member may subscribe only to topics it may describe
        names = list(b.subscribed_topic_names)
        if len(allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, names)) < len(set(names)):
            return HB(error_code=E.TOPIC_AUTHORIZATION_FAILED, member_epoch=b.member_epoch,
                      heartbeat_interval_ms=0)
    code = _not_coordinator(node, b.group_id)
    if not code and _classic_in_use(node, b.group_id) and (
            b.member_epoch != 0 or not coord.upgrade_classic(b.group_id)):
        code = E.GROUP_ID_NOT_FOUND   # a classic group this member may not convert
    if code:
        return HB(error_code=code, member_epoch=b.member_epoch, heartbeat_interval_ms=0)
    owned: dict[str, set[int]] | None = None
    if b.topic_partitions is not None:
        owned = {}
        for tp in b.topic_partitions:
            name = coord.topic_name(tp.topic_id)
            if name is not None:
                owned.setdefault(name, set()).update(tp.partitions)
    code, msg, member_id, epoch, assignment = coord.heartbeat(
        b.group_id, b.member_id, b.member_epoch, instance_id=b.instance_id, rack_id=b.rack_id,
        rebalance_timeout_ms=b.rebalance_timeout_ms,
        topics=None if b.subscribed_topic_names is None else list(b.subscribed_topic_names),
        assignor=b.server_assignor, owned=owned, client_id=req.header.client_id or "",
        client_host="/" + req.connection.peer.rsplit(":", 1)[0],
        regex=b.subscribed_topic_regex if req.api_version >= 1 else None,
        principal=req.connection.principal, auth_host=req.connection.host)
    out = None
    if assignment is not None:
        out = HB.Assignment(topic_partitions=[
            HB.TopicPartitions(topic_id=coord.topic_id(t), partitions=sorted(ps))
            for t, ps in sorted(assignment.items()) if coord.topic_id(t) is not None])
    return HB(error_code=code, error_message=msg, member_id=member_id or None, member_epoch=epoch,
              heartbeat_interval_ms=coord.heartbeat_interval_for(b.group_id) if not code else 0,
              assignment=out)


def _assignment(coord: Any, owned: dict) -> Any:
    return DESC.Assignment(topic_partitions=[
        DESC.TopicPartitions(topic_id=coord.topic_id(t), topic_name=t, partitions=sorted(ps))
        for t, ps in sorted(owned.items()) if coord.topic_id(t) is not None])


@api(ConsumerGroupDescribeRequest, 0, 1)
def consumer_group_describe(node: Node, req: Incoming[ConsumerGroupDescribeRequest]
                           ) -> Answer[ConsumerGroupDescribeResponse]:
    coord = node.cluster.consumer_groups
    out = []
    with_ops = req.body.include_authorized_operations
    for gid in req.body.group_ids:
        code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DESCRIBE, RT.GROUP, gid)
                else _not_coordinator(node, gid))
        g = None if code else coord.describe(gid)
        if code or g is None:
            out.append(DESC.DescribedGroup(error_code=code or E.GROUP_ID_NOT_FOUND, group_id=gid,
                                           group_state="Dead", group_epoch=-1, assignment_epoch=-1,
                                           assignor_name=""))
            continue
        with coord.lock:
            # as Kafka: the group's topics (subscribed, assigned, targeted) must all be
            # describable by the caller, else the group is refused, naming none of them
            topics = {t for m in g.members.values()
                      for t in (*m.topics, *m.assigned, *g.target.get(m.member_id, {}))}
        if len(allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, topics,
                             log_denial=False)) < len(topics):
            out.append(DESC.DescribedGroup(
                error_code=E.TOPIC_AUTHORIZATION_FAILED, group_id=gid, group_state="Dead",
                group_epoch=-1, assignment_epoch=-1, assignor_name="",
                error_message="the group's topics include some the caller may not describe"))
            continue
        with coord.lock:
            out.append(DESC.DescribedGroup(
                error_code=0, group_id=gid, group_state=g.state, group_epoch=g.epoch,
                assignment_epoch=g.assignment_epoch, assignor_name=g.assignor,
                members=[DESC.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                    member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=list(m.topics), subscribed_topic_regex=m.regex,
                    assignment=_assignment(coord, m.assigned),
                    target_assignment=_assignment(coord, g.target.get(m.member_id, {})))
                    for m in g.members.values()]))
        if with_ops:
            out[-1].authorized_operations = operations(node, req, RT.GROUP, gid)
    return DESC(groups=out)


def listed_groups(node: Any, states: set, types: set) -> list:
    """ListGroups rows (``states`` and ``types`` lower case) for the consumer-protocol groups this node coordinates."""
    from kcodec.protocol import ListGroupsResponse as L

    coord = node.cluster.consumer_groups
    out: list[L.ListedGroup] = []
    if types and "consumer" not in types:
        return out
    with coord.lock:
        for g in coord.groups.values():
            if node.cluster.coordinator_for(g.group_id) != node.id or (states and g.state.lower() not in states):
                continue
            out.append(L.ListedGroup(group_id=g.group_id, protocol_type="consumer",
                                     group_state=g.state, group_type="consumer"))
    return out


# ---------------------------------------------------------------------- mixed groups
def mixed_join(node: Any, req: Any) -> Any:
    b = req.body
    coord = node.cluster.consumer_groups
    if _not_coordinator(node, b.group_id) or not coord.has_members(b.group_id):
        return None
    R = JoinGroupResponse
    if b.protocol_type != "consumer" or not b.protocols:
        return R(error_code=E.INCONSISTENT_GROUP_PROTOCOL, member_id=b.member_id,
                 protocol_name="", leader="")
    proto = b.protocols[0]
    try:
        _, sub = decode_versioned(ConsumerProtocolSubscription, proto.metadata)
    except (KcodecError, ValueError):
        return R(error_code=E.INCONSISTENT_GROUP_PROTOCOL, member_id=b.member_id,
                 protocol_name="", leader="")
    owned = {t.topic: set(t.partitions) for t in (sub.owned_partitions or [])}
    code, member_id, gen = coord.classic_join(
        b.group_id, b.member_id, b.session_timeout_ms,
        b.rebalance_timeout_ms if req.api_version >= 1 else b.session_timeout_ms,
        list(sub.topics), owned, req.header.client_id or "",
        "/" + req.connection.peer.rsplit(":", 1)[0],
        [(p.name, p.metadata) for p in b.protocols])
    # the broker assigns: no member is the leader, so no client runs an assignor
    return R(error_code=code, generation_id=gen, protocol_type="consumer",
             protocol_name=proto.name if not code else "", leader="", member_id=member_id,
             members=[])


def mixed_sync(node: Any, req: Any) -> Any:
    b = req.body
    coord = node.cluster.consumer_groups
    if coord.classic_member(b.group_id, b.member_id) is None:
        return None
    code, owned = coord.classic_sync(b.group_id, b.member_id, b.generation_id)
    A = ConsumerProtocolAssignment
    data = encode_versioned(A(assigned_partitions=[
        A.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(owned.items())]), 0)
    return SyncGroupResponse(error_code=code, assignment=data if not code else b"",
                             protocol_type="consumer", protocol_name=b.protocol_name
                             if req.api_version >= 5 else None)


def mixed_heartbeat(node: Any, req: Any) -> Any:
    b = req.body
    coord = node.cluster.consumer_groups
    if coord.classic_member(b.group_id, b.member_id) is None:
        return None
    return HeartbeatResponse(error_code=coord.classic_heartbeat(b.group_id, b.member_id,
                                                                b.generation_id))


def mixed_leave(node: Any, req: Any) -> Any:
    b = req.body
    coord = node.cluster.consumer_groups
    ids = [b.member_id] if req.api_version < 3 else [m.member_id for m in b.members]
    if not ids or any(coord.classic_member(b.group_id, m) is None for m in ids):
        return None
    codes = [coord.classic_leave(b.group_id, m) for m in ids]
    R = LeaveGroupResponse
    if req.api_version < 3:
        return R(error_code=codes[0])
    return R(error_code=0, members=[R.MemberResponse(member_id=m.member_id,
                                                     group_instance_id=m.group_instance_id,
                                                     error_code=c)
                                    for m, c in zip(b.members, codes, strict=False)])
