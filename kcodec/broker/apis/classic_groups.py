"""The group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups.

Each group has one coordinator node (``Cluster.coordinator_for``); the others answer
NOT_COORDINATOR. The work is done by :class:`~kcodec.broker.coordinator.GroupCoordinator`
(membership, and whether a commit or an offset delete is allowed) and, for a consumer-protocol
group, by the KIP-848 coordinator; the offsets themselves are kept by
:class:`~kcodec.broker.coordinator.OffsetStore` (``Cluster.offsets``).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcodec.broker.apis import consumer_groups as kip848
from kcodec.broker.apis import share
from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names, cluster_allowed, operations
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.protocol import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ErrorCode,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode


def _map(value: Any, fn: Callable[[Any], Any]) -> Any:
    if not isinstance(value, concurrent.futures.Future):
        return fn(value)
    out: concurrent.futures.Future = concurrent.futures.Future()
    value.add_done_callback(lambda f: out.set_result(fn(f.result())))
    return out


def _may_read(node: Any, req: Any, group_id: str) -> int:
    """0, or GROUP_AUTHORIZATION_FAILED when the principal may not READ the group (what
    joining, syncing, heart-beating, leaving and committing need)."""
    return 0 if allowed(node, req, Op.READ, RT.GROUP, group_id) else E.GROUP_AUTHORIZATION_FAILED


def _not_coordinator(node: Any, group_id: str) -> int:
    cid = node.cluster.coordinator_for(group_id)
    if cid is None:
        return E.COORDINATOR_NOT_AVAILABLE
    return 0 if cid == node.id else E.NOT_COORDINATOR


@api(FindCoordinatorRequest, 0, 6)
def find_coordinator(node: Node, req: Incoming[FindCoordinatorRequest]
                    ) -> Answer[FindCoordinatorResponse]:
    R = FindCoordinatorResponse
    body = req.body
    keys = [body.key] if req.api_version < 4 else list(body.coordinator_keys)
    out: list[tuple[str, int, int, str, int]] = []
    for key in keys:
        if body.key_type not in (0, 1):
            out.append((key, E.INVALID_REQUEST, -1, "", -1))
            continue
        if body.key_type == 0 and not allowed(node, req, Op.DESCRIBE, RT.GROUP, key):
            out.append((key, E.GROUP_AUTHORIZATION_FAILED, -1, "", -1))
            continue
        if body.key_type == 1 and not allowed(node, req, Op.DESCRIBE, RT.TRANSACTIONAL_ID, key):
            out.append((key, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1))
            continue
        cid = node.cluster.coordinator_for(key)
        target = node.cluster.nodes.get(cid) if cid is not None else None
        listener = getattr(req.connection, "listener", None) or node.listeners[0].name
        if target is None or target.listener(listener) is None:
            out.append((key, E.COORDINATOR_NOT_AVAILABLE, -1, "", -1))
        else:
            out.append((key, 0, target.id, *target.address_of(listener)))
    if req.api_version < 4:
        key, code, nid, host, port = out[0]
        return R(error_code=code, error_message=None, node_id=nid, host=host, port=port)
    return R(coordinators=[R.Coordinator(key=k, node_id=n, host=h, port=p, error_code=c,
                                         error_message=None) for k, c, n, h, p in out])


@api(JoinGroupRequest, 0, 9)
def join_group(node: Node, req: Incoming[JoinGroupRequest]) -> Answer[JoinGroupResponse]:
    R = JoinGroupResponse
    b = req.body
    code = _may_read(node, req, b.group_id) or _not_coordinator(node, b.group_id) \
        or (node.cluster.groups.session_timeout_error(b.session_timeout_ms) if b.group_id else 0)
    if code:
        return R(error_code=code, member_id=b.member_id, protocol_name="", leader="")
    mixed = kip848.mixed_join(node, req)   # a classic member of a consumer-protocol group
    if mixed is not None:
        return mixed
    res = node.cluster.groups.join(
        b.group_id, b.member_id, b.group_instance_id if req.api_version >= 5 else None,
        b.protocol_type, [(p.name, p.metadata) for p in b.protocols], b.session_timeout_ms,
        b.rebalance_timeout_ms if req.api_version >= 1 else b.session_timeout_ms,
        req.header.client_id or "", "/" + req.connection.peer.rsplit(":", 1)[0])

    def answer(r: Any) -> Any:
        return R(error_code=r.error_code, generation_id=r.generation_id,
                 protocol_type=r.protocol_type, protocol_name=r.protocol_name or "",
                 leader=r.leader, member_id=r.member_id or b.member_id,
                 skip_assignment=r.skip_assignment,
                 members=[R.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
                          for m, i, meta in r.members])
    return _map(res, answer)


@api(SyncGroupRequest, 0, 5)
def sync_group(node: Node, req: Incoming[SyncGroupRequest]) -> Answer[SyncGroupResponse]:
    R = SyncGroupResponse
    b = req.body
    if _may_read(node, req, b.group_id):
        return R(error_code=E.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    mixed = kip848.mixed_sync(node, req)
    if mixed is not None:
        return mixed
    code = _not_coordinator(node, b.group_id)
    if code:
        return R(error_code=code, assignment=b"")
    coord = node.cluster.groups
    res = coord.sync(b.group_id, b.generation_id, b.member_id,
                     b.group_instance_id if req.api_version >= 3 else None,
                     {a.member_id: a.assignment for a in b.assignments})

    def answer(r: Any) -> Any:
        g = coord.groups.get(b.group_id)
        return R(error_code=r[0], assignment=r[1],
                 protocol_type=g.protocol_type if g else None,
                 protocol_name=g.protocol_name if g else None)
    return _map(res, answer)


@api(HeartbeatRequest, 0, 4)
def heartbeat(node: Node, req: Incoming[HeartbeatRequest]) -> Answer[HeartbeatResponse]:
    b = req.body
    if _may_read(node, req, b.group_id):
        return HeartbeatResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
    mixed = kip848.mixed_heartbeat(node, req)
    if mixed is not None:
        return mixed
    code = _not_coordinator(node, b.group_id)
    if not code:
        code = node.cluster.groups.heartbeat(b.group_id, b.generation_id, b.member_id,
                                             b.group_instance_id if req.api_version >= 3 else None)
    return HeartbeatResponse(error_code=code)


@api(LeaveGroupRequest, 0, 5)
def leave_group(node: Node, req: Incoming[LeaveGroupRequest]) -> Answer[LeaveGroupResponse]:
    R = LeaveGroupResponse
    b = req.body
    if _may_read(node, req, b.group_id):
        return R(error_code=E.GROUP_AUTHORIZATION_FAILED)
    mixed = kip848.mixed_leave(node, req)
    if mixed is not None:
        return mixed
    code = _not_coordinator(node, b.group_id)
    if code:
        return R(error_code=code)
    members: list[tuple[str, str | None]]
    if req.api_version < 3:
        members = [(b.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in b.members]
    code, codes = node.cluster.groups.leave(b.group_id, members)
    if req.api_version < 3:
        return R(error_code=code or codes[0])
    return R(error_code=code, members=[R.MemberResponse(member_id=m, group_instance_id=i, error_code=c)
                                       for (m, i), c in zip(members, codes, strict=False)])


@api(OffsetCommitRequest, 0, 9)
def offset_commit(node: Node, req: Incoming[OffsetCommitRequest]) -> Answer[OffsetCommitResponse]:
    R = OffsetCommitResponse
    b = req.body
    code = _may_read(node, req, b.group_id) or _not_coordinator(node, b.group_id)
    state = node.cluster.state
    readable = allowed_names(node, req, Op.READ, RT.TOPIC, (t.name for t in b.topics))
    if not code:
        offsets = []
        for t in b.topics:
            for p in t.partitions:
                if t.name in readable and state.partition(t.name, p.partition_index) is not None:
                    offsets.append((t.name, p.partition_index, p.committed_offset,
                                    p.committed_leader_epoch, p.committed_metadata))
        cgroups = node.cluster.consumer_groups
        if cgroups.is_consumer_group(b.group_id):   # KIP-848: member epochs, not generations
            code = cgroups.check_commit(b.group_id, b.member_id, b.generation_id_or_member_epoch,
                                        [(o[0], o[1]) for o in offsets])
            if not code:
                code = node.cluster.groups.commit(b.group_id, -1, "", None, offsets)
        else:
            code = node.cluster.groups.commit(b.group_id, b.generation_id_or_member_epoch, b.member_id,
                                              b.group_instance_id if req.api_version >= 7 else None,
                                              offsets)
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
        R.OffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=code or (E.TOPIC_AUTHORIZATION_FAILED if t.name not in readable else
                                0 if state.partition(t.name, p.partition_index) is not None
                                else E.UNKNOWN_TOPIC_OR_PARTITION))
        for p in t.partitions]) for t in b.topics])


def _fetch_offsets(node: Any, req: Any, group_id: str, topics: Any,
                   stable: bool = False) -> tuple[int, list]:
    """``(error, [(topic, [(partition, offset, epoch, metadata, error)])])``; ``stable``
    (require_stable): UNSTABLE_OFFSET_COMMIT for offsets waiting in an open transaction.
    Topics the principal may not describe: TOPIC_AUTHORIZATION_FAILED when named, left out
    when all are asked for."""
    code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DESCRIBE, RT.GROUP, group_id)
            else _not_coordinator(node, group_id))
    if code:
        return code, []
    committed = node.cluster.offsets.committed(group_id)
    every = topics is None
    if topics is None:
        names: dict[str, list[int]] = {}
        for (t, p) in sorted(committed):
            names.setdefault(t, []).append(p)
        topics = list(names.items())
    visible = allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, (n for n, _ in topics),
                            log_denial=not every)
    pending = node.cluster.txns.pending_offsets(group_id) if stable else set()
    out: list[tuple[str, list[tuple[int, int, int, str, int]]]] = []
    for name, parts in topics:
        rows: list[tuple[int, int, int, str, int]] = []
        if name not in visible:
            if not every:
                out.append((name, [(p, -1, -1, "", int(E.TOPIC_AUTHORIZATION_FAILED))
                                   for p in parts]))
            continue
        for p in parts:
            if (name, p) in pending:
                rows.append((p, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT))
                continue
            o, e, m = committed.get((name, p), (-1, -1, ""))
            rows.append((p, o, e, m, 0))
        out.append((name, rows))
    return 0, out


@api(OffsetFetchRequest, 0, 9)
def offset_fetch(node: Node, req: Incoming[OffsetFetchRequest]) -> Answer[OffsetFetchResponse]:
    R = OffsetFetchResponse
    b = req.body
    if req.api_version < 8:
        topics = None if b.topics is None else [(t.name, list(t.partition_indexes)) for t in b.topics]
        code, out = _fetch_offsets(node, req, b.group_id, topics,
                                   req.api_version >= 7 and b.require_stable)
        if code and req.api_version < 2 and topics:
            # v0-1 have no group error field: each partition asked for carries it
            out = [(n, [(p, -1, -1, "", code) for p in parts]) for n, parts in topics]
        return R(error_code=code, topics=[R.OffsetFetchResponseTopic(name=n, partitions=[
            R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o,
                                           committed_leader_epoch=e, metadata=m, error_code=c)
            for p, o, e, m, c in rows]) for n, rows in out])
    groups = []
    for g in b.groups:
        topics = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
        code, out = _fetch_offsets(node, req, g.group_id, topics, b.require_stable)
        groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code, topics=[
            R.OffsetFetchResponseTopics(name=n, partitions=[
                R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=o,
                                                committed_leader_epoch=e, metadata=m, error_code=c)
                for p, o, e, m, c in rows]) for n, rows in out]))
    return R(groups=groups)


@api(OffsetDeleteRequest, 0, 0)
def offset_delete(node: Node, req: Incoming[OffsetDeleteRequest]) -> Answer[OffsetDeleteResponse]:
    """OffsetDelete: a group with live members keeps the offsets of topics it subscribes to
    (GROUP_SUBSCRIBED_TO_TOPIC for those partitions) and deletes the others, as Kafka."""
    R = OffsetDeleteResponse
    b = req.body
    code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DELETE, RT.GROUP, b.group_id)
            else _not_coordinator(node, b.group_id))
    readable = allowed_names(node, req, Op.READ, RT.TOPIC, (t.name for t in b.topics))
    results: dict = {}
    if not code:
        subscribed = node.cluster.consumer_groups.subscribed_topics(b.group_id)
        code, results = node.cluster.groups.delete_offsets(
            b.group_id, [(t.name, p.partition_index) for t in b.topics for p in t.partitions
                         if t.name in readable], subscribed)
    return R(error_code=code, topics=[R.OffsetDeleteResponseTopic(name=t.name, partitions=[
        R.OffsetDeleteResponsePartition(
            partition_index=p.partition_index,
            error_code=results.get((t.name, p.partition_index), 0) if t.name in readable
            else E.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]) for t in b.topics] if not code else [])


def _dead(req: Any, gid: str, why: str) -> Any:
    """The row for a group that is not a classic group, as Kafka 4 answers it: ``Dead`` with
    no members; from v6 also GROUP_ID_NOT_FOUND and why (``describe_groups`` below)."""
    D = DescribeGroupsResponse
    v6 = req.api_version >= 6
    return D.DescribedGroup(error_code=E.GROUP_ID_NOT_FOUND if v6 else 0,
                            error_message=why if v6 else None, group_id=gid,
                            group_state="Dead", protocol_type="", protocol_data="")


@api(DescribeGroupsRequest, 0, 6)
def describe_groups(node: Node, req: Incoming[DescribeGroupsRequest]
                   ) -> Answer[DescribeGroupsResponse]:
    """DescribeGroups, the classic API, as Kafka 4's group coordinator answers it: it
    describes classic groups only. A consumer-protocol group (KIP-848), also one converted
    from a classic group or one with classic members, is ``Dead`` here, with no members (v6:
    GROUP_ID_NOT_FOUND, "Group <id> is not a classic group."); ConsumerGroupDescribe
    describes it, and admin clients ask that first and fall back to this API for classic
    groups."""
    D = DescribeGroupsResponse
    coord = node.cluster.groups
    out = []
    with_ops = req.api_version >= 3 and req.body.include_authorized_operations
    for gid in req.body.groups:
        code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DESCRIBE, RT.GROUP, gid)
                else _not_coordinator(node, gid))
        if code:
            out.append(D.DescribedGroup(error_code=code, group_id=gid, group_state="",
                                        protocol_type="", protocol_data=""))
            continue
        if node.cluster.consumer_groups.is_consumer_group(gid):
            out.append(_dead(req, gid, f"Group {gid} is not a classic group."))
            continue
        with coord.lock:
            g = coord.groups.get(gid)
            if g is None or g.state == "Dead":
                out.append(_dead(req, gid, f"Group {gid} not found."))
                continue
            stable = g.state == "Stable"
            out.append(D.DescribedGroup(
                error_code=0, group_id=gid, group_state=g.state, protocol_type=g.protocol_type or "",
                protocol_data=g.protocol_name or "" if stable else "",
                members=[D.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(g.protocol_name) if stable else b"",
                    member_assignment=m.assignment if stable else b"")
                    for m in g.members.values()]))
        if with_ops:
            out[-1].authorized_operations = operations(node, req, RT.GROUP, gid)
    return D(groups=out)


@api(ListGroupsRequest, 0, 5)
def list_groups(node: Node, req: Incoming[ListGroupsRequest]) -> Answer[ListGroupsResponse]:
    L = ListGroupsResponse
    coord = node.cluster.groups
    # Kafka matches states and types case-insensitively (librdkafka sends "Consumer")
    states = {s.lower() for s in req.body.states_filter} if req.api_version >= 4 else set()
    types = {t.lower() for t in req.body.types_filter} if req.api_version >= 5 else set()
    out = []
    with coord.lock:
        for g in coord.groups.values():
            if node.cluster.coordinator_for(g.group_id) != node.id:
                continue
            if node.cluster.consumer_groups.is_consumer_group(g.group_id):
                continue   # its offsets live here; listed below as a consumer group
            if states and g.state.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(L.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "",
                                     group_state=g.state, group_type="classic"))
    out += kip848.listed_groups(node, states, types)
    out += share.listed_groups(node, states, types)
    if not cluster_allowed(node, req, Op.DESCRIBE, log_denial=False):
        # without DESCRIBE on the cluster: the groups the principal may describe
        visible = allowed_names(node, req, Op.DESCRIBE, RT.GROUP, (g.group_id for g in out),
                                log_denial=False)
        out = [g for g in out if g.group_id in visible]
    return L(error_code=0, groups=out)


def _delete_consumer_group(node: Any, gid: str) -> int:
    """A consumer-protocol group (KIP-848) is deleted when it has no members; its
    committed offsets (and the Empty classic record a commit made) go with it."""
    code = node.cluster.consumer_groups.delete(gid)
    if not code:
        node.cluster.groups.delete_group(gid)    # GROUP_ID_NOT_FOUND: it committed nothing
    return code


@api(DeleteGroupsRequest, 0, 2)
def delete_groups(node: Node, req: Incoming[DeleteGroupsRequest]) -> Answer[DeleteGroupsResponse]:
    D = DeleteGroupsResponse
    out = []
    for gid in req.body.groups_names:
        code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DELETE, RT.GROUP, gid)
                else _not_coordinator(node, gid) or (
                    node.cluster.share_groups.delete(gid)
                    if node.cluster.share_groups.is_share_group(gid)
                    else _delete_consumer_group(node, gid)
                    if node.cluster.consumer_groups.is_consumer_group(gid)
                    else node.cluster.groups.delete_group(gid)))
        out.append(D.DeletableGroupResult(group_id=gid, error_code=code))
    return D(results=out)

