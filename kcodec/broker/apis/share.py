"""The share-group APIs (KIP-932, KIP-1206, KIP-1222): ShareGroupHeartbeat,
ShareGroupDescribe, ShareFetch, ShareAcknowledge, and the admin's
Describe/Alter/DeleteShareGroupOffsets.

Membership and assignment are the share-group coordinator's
(:mod:`kcodec.broker.coordinator.share_group`); records, locks, acknowledgements and share
sessions are the share-partition manager's (:mod:`kcodec.broker.share.manager`).

Authorization, as Kafka's KafkaApis: READ on the group for the heartbeat, fetch,
acknowledge and offset alteration (DESCRIBE on the subscribed topics for the heartbeat,
READ on each fetched, acknowledged or altered topic); DESCRIBE on the group (and the
topics) to describe the group or its offsets; DELETE on the group (READ on the topics) to
delete its offsets.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names, operations
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.purgatory import Delayed
from kcodec.protocol import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ErrorCode,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__ = ["listed_groups"]

E = ErrorCode
SF = ShareFetchResponse
SA = ShareAcknowledgeResponse
HB = ShareGroupHeartbeatResponse
FINAL_EPOCH = -1
RECORD_LIMIT = 1           # ShareAcquireMode: 0 batch-optimized, 1 record-limit (KIP-1206)
RENEW = 4
DEFAULT_MAX_RECORDS = 500
NO_ID = uuid.UUID(int=0)


def _not_coordinator(node: Any, group_id: str) -> int:
    cid = node.cluster.coordinator_for(group_id)
    if cid is None:
        return E.COORDINATOR_NOT_AVAILABLE
    return 0 if cid == node.id else E.NOT_COORDINATOR


def _topic_names(node: Any) -> dict[Any, str]:
    return {t.topic_id: name for name, t in list(node.cluster.state.topics.items())}


def _partition_error(node: Any, topic: str | None, index: int) -> tuple[int, Any]:
    """(error, the partition's leader and epoch) for a share partition this node serves."""
    if topic is None:
        return E.UNKNOWN_TOPIC_ID, None
    p = node.cluster.state.partition(topic, index)
    if p is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, None
    if p.leader != node.id:
        return E.NOT_LEADER_OR_FOLLOWER, p
    return 0, p


# ---------------------------------------------------------------------- membership
@api(ShareGroupHeartbeatRequest, 1, 1)
def share_group_heartbeat(node: Node, req: Incoming[ShareGroupHeartbeatRequest]
                         ) -> Answer[ShareGroupHeartbeatResponse]:
    b = req.body
    coord = node.cluster.share_groups
    if not allowed(node, req, Op.READ, RT.GROUP, b.group_id):
        return HB(error_code=E.GROUP_AUTHORIZATION_FAILED, member_epoch=b.member_epoch)
    if b.subscribed_topic_names:
        names = list(b.subscribed_topic_names)
        if len(allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, names)) < len(set(names)):
            return HB(error_code=E.TOPIC_AUTHORIZATION_FAILED, member_epoch=b.member_epoch)
    code = _not_coordinator(node, b.group_id)
    if code:
        return HB(error_code=code, member_epoch=b.member_epoch)
    code, msg, epoch, assignment = coord.heartbeat(
        b.group_id, b.member_id, b.member_epoch, rack_id=b.rack_id,
        topics=None if b.subscribed_topic_names is None else list(b.subscribed_topic_names),
        client_id=req.header.client_id or "",
        client_host="/" + req.connection.peer.rsplit(":", 1)[0])
    out = None
    if assignment is not None:
        out = HB.Assignment(topic_partitions=[
            HB.TopicPartitions(topic_id=coord.topic_id(t), partitions=sorted(ps))
            for t, ps in sorted(assignment.items()) if coord.topic_id(t) is not None])
    return HB(error_code=code, error_message=msg, member_id=b.member_id or None,
              member_epoch=epoch,
              heartbeat_interval_ms=coord.heartbeat_interval_ms(b.group_id) if not code else 0,
              assignment=out)


@api(ShareGroupDescribeRequest, 1, 1)
def share_group_describe(node: Node, req: Incoming[ShareGroupDescribeRequest]
                        ) -> Answer[ShareGroupDescribeResponse]:
    D = ShareGroupDescribeResponse
    coord = node.cluster.share_groups
    out = []
    for gid in req.body.group_ids:
        code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DESCRIBE, RT.GROUP, gid)
                else _not_coordinator(node, gid))
        g = None if code else coord.describe(gid)
        if code or g is None:
            out.append(D.DescribedGroup(
                error_code=code or E.GROUP_ID_NOT_FOUND, group_id=gid, group_state="Dead",
                group_epoch=-1, assignment_epoch=-1, assignor_name="",
                error_message=None if code else f"group {gid!r} is not a share group"))
            continue
        with coord.lock:
            out.append(D.DescribedGroup(
                error_code=0, group_id=gid, group_state=g.state, group_epoch=g.epoch,
                assignment_epoch=g.assignment_epoch, assignor_name="simple",
                members=[D.Member(
                    member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
                    client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=list(m.topics),
                    assignment=D.Assignment(topic_partitions=[
                        D.TopicPartitions(topic_id=coord.topic_id(t), topic_name=t,
                                          partitions=sorted(ps))
                        for t, ps in sorted(m.assigned.items())
                        if coord.topic_id(t) is not None]))
                    for m in g.members.values()]))
        if req.body.include_authorized_operations:
            out[-1].authorized_operations = operations(node, req, RT.GROUP, gid)
    return D(groups=out)


def listed_groups(node: Any, states: set, types: set) -> list:
    """ListGroups rows (``states`` and ``types`` lower case) for the share groups this node coordinates."""
    from kcodec.protocol import ListGroupsResponse as L

    coord = node.cluster.share_groups
    out: list[L.ListedGroup] = []
    if types and "share" not in types:
        return out
    with coord.lock:
        for g in coord.groups.values():
            if node.cluster.coordinator_for(g.group_id) != node.id or (states and g.state.lower() not in states):
                continue
            out.append(L.ListedGroup(group_id=g.group_id, protocol_type="share",
                                     group_state=g.state, group_type="share"))
    return out


# ---------------------------------------------------------------------- fetch and acknowledge
def _ack_batches(p: Any) -> list[tuple[int, int, list[int]]]:
    return [(a.first_offset, a.last_offset, list(a.acknowledge_types))
            for a in p.acknowledgement_batches]


def _has_renew(batches: list) -> bool:
    return any(RENEW in types for _, _, types in batches)


class _Fetch:
    """One ShareFetch's work after its acknowledgements: acquire, then answer."""

    def __init__(self, node: Any, req: Any, group: str, member: str, parts: list,
                 errors: dict, acked: dict, ids: dict) -> None:
        self.node, self.req, self.group, self.member = node, req, group, member
        self.parts = parts              # (topic, index) to fetch
        self.errors = errors            # (topic, index) -> (error, partition or None)
        self.acked = acked              # (topic, index) -> acknowledge error
        self.ids = ids                  # topic -> topic id
        b = req.body
        self.max_records = b.max_records if b.max_records > 0 else DEFAULT_MAX_RECORDS
        self.strict = req.api_version >= 2 and b.share_acquire_mode == RECORD_LIMIT
        # a soft limit (the first batch comes whole), but 0 brings no records, as in Kafka
        self.max_bytes = max(0, b.max_bytes)
        self.got: dict[tuple[str, int], tuple[int, bytes, list]] = {}

    def acquire(self) -> int:
        mgr = self.node.cluster.share
        left, total = self.max_records, 0
        room = self.max_bytes
        for key in self.parts:
            if left <= 0 or room <= 0:
                break
            code, p = _partition_error(self.node, key[0], key[1])
            if code:         # the leader moved while this fetch waited
                self.errors[key] = (code, p)
                continue
            if total and not mgr.is_set_up(self.group, key[0], key[1]):
                # as in Kafka, a share partition's state is set up at its first fetch and a
                # fetch that has records answers without the partitions still being set
                # up: they bring theirs in the next one
                mgr.partition(self.group, key[0], key[1])
                continue
            code, records, ranges = mgr.fetch(self.group, self.member, key[0], key[1], left,
                                              self.strict, room)
            n = sum(last - first + 1 for first, last, _ in ranges)
            if code or n:
                self.got[key] = (code, records, ranges)
            left -= n
            total += n
            room -= len(records)
        return total

    def answer(self) -> Any:
        cluster = self.node.cluster
        lock_ms = cluster.share.configs.get_int(self.group, "share.record.lock.duration.ms")
        keys = sorted(set(self.errors) | set(self.acked) | set(self.got))
        topics: dict[str, list] = {}
        endpoints: set[int] = set()
        for key in keys:
            topic, index = key
            code, p = self.errors.get(key, (0, None))
            fcode, records, ranges = self.got.get(key, (0, b"", []))
            leader = SF.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            if p is not None:
                leader = SF.LeaderIdAndEpoch(leader_id=p.leader, leader_epoch=p.leader_epoch)
                if code == E.NOT_LEADER_OR_FOLLOWER:
                    endpoints.add(p.leader)
            topics.setdefault(topic, []).append(SF.PartitionData(
                partition_index=index, error_code=code or fcode,
                acknowledge_error_code=self.acked.get(key, 0), current_leader=leader,
                records=records, acquired_records=[
                    SF.AcquiredRecords(first_offset=f, last_offset=last, delivery_count=c)
                    for f, last, c in ranges]))
        listener = getattr(self.req.connection, "listener", None) or self.node.listeners[0].name
        nodes = []
        for nid in sorted(endpoints):
            n = cluster.nodes.get(nid)
            if n is not None and n.listener(listener) is not None:
                host, port = n.address_of(listener)
                nodes.append(SF.NodeEndpoint(node_id=nid, host=host, port=port))
        return SF(error_code=0, acquisition_lock_timeout_ms=lock_ms, node_endpoints=nodes,
                  responses=[SF.ShareFetchableTopicResponse(topic_id=self.ids.get(t, NO_ID), partitions=ps)
                             for t, ps in topics.items()])


class _DelayedShareFetch(Delayed):
    """A ShareFetch waiting for records. Acquiring has an effect (the records are locked
    to the member), so one attempt at a time, and none after the answer: two notifies at
    once (records produced to two of its partitions) or a notify beside the expiry would
    otherwise acquire records that no answer carries, locked until the lock times out and
    delivered again with their count up."""

    def __init__(self, work: _Fetch) -> None:
        super().__init__()
        self.work = work
        self._attempt = threading.Lock()

    def try_complete(self) -> bool:
        with self._attempt:
            if self.done:
                return False
            if self.work.acquire():
                return self.complete(self.work.answer())
            return False

    def expire(self) -> None:
        with self._attempt:
            if not self.done:
                self.complete(self.work.answer())


def _session_request(node: Any, req: Any) -> tuple[int, str | None, Any]:
    """The checks ShareFetch and ShareAcknowledge share: (error, message, session)."""
    b = req.body
    if not b.group_id:
        return E.INVALID_REQUEST, "the group id must be set", None
    if not b.member_id:
        return E.INVALID_REQUEST, "the member id must be set", None
    if not allowed(node, req, Op.READ, RT.GROUP, b.group_id):
        return E.GROUP_AUTHORIZATION_FAILED, None, None
    code, session = node.cluster.share.session(node.id, b.group_id, b.member_id,
                                               b.share_session_epoch)
    return code, None, session


@api(ShareFetchRequest, 1, 2)
def share_fetch(node: Node, req: Incoming[ShareFetchRequest]) -> Answer[ShareFetchResponse]:
    b = req.body
    mgr = node.cluster.share
    epoch = b.share_session_epoch
    batches = {(t.topic_id, p.partition_index): _ack_batches(p)
               for t in b.topics for p in t.partitions if p.acknowledgement_batches}
    if epoch == 0 and batches:
        return SF(error_code=E.INVALID_REQUEST,
                  error_message="a share session's first fetch (epoch 0) cannot acknowledge")
    if req.api_version < 2 and any(_has_renew(x) for x in batches.values()):
        return SF(error_code=E.INVALID_REQUEST, error_message="RENEW needs ShareFetch v2")
    code, msg, session = _session_request(node, req)
    if code:
        return SF(error_code=code, error_message=msg)
    names = _topic_names(node)
    ids = {n: tid for tid, n in names.items()}
    group, member = b.group_id or "", b.member_id or ""   # both set: _session_request
    requested = [(names.get(t.topic_id), p.partition_index, t.topic_id)
                 for t in b.topics for p in t.partitions]
    readable = allowed_names(node, req, Op.READ, RT.TOPIC, {n for n, _, _ in requested})
    errors: dict[tuple[Any, int], tuple[int, Any]] = {}
    acked: dict[tuple[Any, int], int] = {}
    for name, index, tid in requested:
        key = (name if name is not None else str(tid), index)
        if name is None:
            ids[str(tid)] = tid
        code, p = _partition_error(node, name, index)
        if not code and name not in readable:
            code = E.TOPIC_AUTHORIZATION_FAILED
        if code:
            errors[key] = (code, p)
            if (tid, index) in batches:
                acked[key] = code
            continue
        errors.setdefault(key, (0, p))
        if (tid, index) in batches:
            acked[key] = mgr.acknowledge(group, member, name, index, batches[(tid, index)])
    if epoch == FINAL_EPOCH:
        mgr.close_session(node.id, group, member)
        work = _Fetch(node, req, group, member, [], {k: v for k, v in errors.items() if v[0]},
                      acked, ids)
        return work.answer()
    with mgr.lock:
        for t in b.forgotten_topics_data:
            for index in t.partitions:
                session.parts.discard((t.topic_id, index))
        for name, index, tid in requested:
            if name is not None and not errors[(name, index)][0]:
                session.parts.add((tid, index))
        # the session's partitions of a topic that is gone (deleted, perhaps created again
        # under its name with another id) are answered UNKNOWN_TOPIC_ID once and leave it
        for tid, index in sorted(session.parts, key=str):
            if tid not in names:
                session.parts.discard((tid, index))
                errors[(str(tid), index)] = (E.UNKNOWN_TOPIC_ID, None)
                ids[str(tid)] = tid
        parts = sorted((names[tid], index) for tid, index in session.parts)
        # the next fetch starts at another partition, so that none starves the rest
        if parts:
            shift = epoch % len(parts)
            parts = parts[shift:] + parts[:shift]
    failed = {k: v for k, v in errors.items() if v[0]}
    shown = {k: v for k, v in errors.items() if k in failed or epoch == 0}
    work = _Fetch(node, req, group, member, [k for k in parts if k not in failed], shown,
                  acked, ids)
    if work.acquire() or failed or b.max_wait_ms <= 0 or not work.parts:
        return work.answer()
    op = _DelayedShareFetch(work)
    return node.cluster.purgatory.watch(op, list(work.parts), b.max_wait_ms / 1000)


@api(ShareAcknowledgeRequest, 1, 2)
def share_acknowledge(node: Node, req: Incoming[ShareAcknowledgeRequest]
                     ) -> Answer[ShareAcknowledgeResponse]:
    b = req.body
    mgr = node.cluster.share
    lock_ms = 0
    if b.share_session_epoch == 0:
        return SA(error_code=E.INVALID_SHARE_SESSION_EPOCH,
                  error_message="acknowledge within a share session (epoch > 0, or -1 to close)")
    code, msg, _session = _session_request(node, req)
    if code:
        return SA(error_code=code, error_message=msg)
    names = _topic_names(node)
    group, member = b.group_id, b.member_id
    lock_ms = mgr.configs.get_int(group, "share.record.lock.duration.ms")
    readable = allowed_names(node, req, Op.READ, RT.TOPIC,
                             {names.get(t.topic_id) for t in b.topics})
    out = []
    for t in b.topics:
        name = names.get(t.topic_id)
        parts = []
        for p in t.partitions:
            batches = _ack_batches(p)
            code, part = _partition_error(node, name, p.partition_index)
            if not code and name not in readable:
                code = E.TOPIC_AUTHORIZATION_FAILED
            if not code and req.api_version < 2 and _has_renew(batches):
                code = E.INVALID_REQUEST
            if not code:
                code = mgr.acknowledge(group, member, name, p.partition_index, batches)
            leader = SA.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            if part is not None:
                leader = SA.LeaderIdAndEpoch(leader_id=part.leader, leader_epoch=part.leader_epoch)
            parts.append(SA.PartitionData(partition_index=p.partition_index, error_code=code,
                                          current_leader=leader))
        out.append(SA.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
    if b.share_session_epoch == FINAL_EPOCH:
        mgr.close_session(node.id, group, member)
    return SA(error_code=0, acquisition_lock_timeout_ms=lock_ms, responses=out)


# ---------------------------------------------------------------------- admin: start offsets
@api(DescribeShareGroupOffsetsRequest, 0, 0)
def describe_share_group_offsets(node: Node, req: Incoming[DescribeShareGroupOffsetsRequest]
                                ) -> Answer[DescribeShareGroupOffsetsResponse]:
    D = DescribeShareGroupOffsetsResponse
    mgr = node.cluster.share
    state = node.cluster.state
    out = []
    for g in req.body.groups:
        gid = g.group_id
        code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DESCRIBE, RT.GROUP, gid)
                else _not_coordinator(node, gid))
        if code:
            out.append(D.DescribeShareGroupOffsetsResponseGroup(group_id=gid, error_code=code))
            continue
        if g.topics is None:     # every partition the group has a start offset on
            wanted: dict[str, list[int]] = {}
            for (grp, t, p) in sorted(set(mgr.parts) | set(mgr.store.partitions)):
                if grp == gid:
                    wanted.setdefault(t, []).append(p)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        visible = allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, wanted)
        topics = []
        for name, parts in wanted.items():
            topic = state.topics.get(name)
            rows = []
            for index in parts:
                pcode: int
                if name not in visible:
                    pcode = E.TOPIC_AUTHORIZATION_FAILED
                elif topic is None or index not in topic.partitions:
                    pcode = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    pcode = 0
                start = mgr.start_offset(gid, name, index) if not pcode else None
                rows.append(D.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=-1 if start is None else start,
                    leader_epoch=-1, error_code=pcode))
            topics.append(D.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id if topic is not None else NO_ID,
                partitions=rows))
        out.append(D.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=topics))
    return D(groups=out)


def _empty_share_group(node: Any, gid: str) -> tuple[int, str | None]:
    coord = node.cluster.share_groups
    if coord.other_kinds(gid):
        return E.GROUP_ID_NOT_FOUND, f"group {gid!r} is not a share group"
    g = coord.describe(gid)
    if g is not None and g.members:
        return E.NON_EMPTY_GROUP, (f"group {gid!r} has {len(g.members)} members: stop its "
                                   "consumers first")
    return 0, None


@api(AlterShareGroupOffsetsRequest, 0, 0)
def alter_share_group_offsets(node: Node, req: Incoming[AlterShareGroupOffsetsRequest]
                             ) -> Answer[AlterShareGroupOffsetsResponse]:
    R = AlterShareGroupOffsetsResponse
    b = req.body
    gid = b.group_id
    state = node.cluster.state
    code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.READ, RT.GROUP, gid)
            else _not_coordinator(node, gid))
    msg = None
    if not code:
        code, msg = _empty_share_group(node, gid)
    readable = allowed_names(node, req, Op.READ, RT.TOPIC, {t.topic_name for t in b.topics})
    out = []
    for t in b.topics:
        topic = state.topics.get(t.topic_name)
        rows = []
        for p in t.partitions:
            pcode, pmsg = code, msg
            if not pcode and t.topic_name not in readable:
                pcode = E.TOPIC_AUTHORIZATION_FAILED
            elif not pcode and (topic is None or p.partition_index not in topic.partitions):
                pcode = E.UNKNOWN_TOPIC_OR_PARTITION
            elif not pcode:
                log = topic.partitions[p.partition_index].log
                if not log.log_start_offset <= p.start_offset <= log.log_end_offset:
                    pcode = E.OFFSET_OUT_OF_RANGE
                    pmsg = (f"{p.start_offset} is outside {t.topic_name}-{p.partition_index}'s "
                            f"offsets [{log.log_start_offset}, {log.log_end_offset}]")
                else:
                    node.cluster.share_groups.touch(gid)
                    node.cluster.share.alter_start(gid, t.topic_name, p.partition_index,
                                                   p.start_offset)
            rows.append(R.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=pcode, error_message=pmsg))
        out.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else NO_ID,
            partitions=rows))
    return R(responses=out)


@api(DeleteShareGroupOffsetsRequest, 0, 0)
def delete_share_group_offsets(node: Node, req: Incoming[DeleteShareGroupOffsetsRequest]
                              ) -> Answer[DeleteShareGroupOffsetsResponse]:
    R = DeleteShareGroupOffsetsResponse
    b = req.body
    gid = b.group_id
    mgr = node.cluster.share
    code = (E.GROUP_AUTHORIZATION_FAILED if not allowed(node, req, Op.DELETE, RT.GROUP, gid)
            else _not_coordinator(node, gid))
    msg = None
    if not code:
        code, msg = _empty_share_group(node, gid)
    if code:
        return R(error_code=code, error_message=msg)
    readable = allowed_names(node, req, Op.READ, RT.TOPIC, {t.topic_name for t in b.topics})
    out = []
    for t in b.topics:
        topic = node.cluster.state.topics.get(t.topic_name)
        held = sorted({p for (g, name, p) in set(mgr.parts) | set(mgr.store.partitions)
                       if g == gid and name == t.topic_name})
        pcode = (E.TOPIC_AUTHORIZATION_FAILED if t.topic_name not in readable
                 else E.UNKNOWN_TOPIC_OR_PARTITION if topic is None else 0)
        if not pcode:
            mgr.delete_state(gid, t.topic_name)
        out.append(R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else NO_ID,
            partitions=[R.DeleteShareGroupOffsetsResponsePartition(partition_index=p,
                                                                   error_code=pcode)
                        for p in held]))
    return R(responses=out)
