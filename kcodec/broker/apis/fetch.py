"""Fetch: read whole batches from the leaders' logs, long-poll for ``min_bytes``, and keep
incremental fetch sessions (KIP-227).

A fetch reads each partition from ``fetch_offset`` up to ``partition_max_bytes`` and the
request's ``max_bytes`` in all (the first partition with data always gets at least one whole
batch, so a batch bigger than the limits still makes progress). If fewer than ``min_bytes``
came back and nothing failed, the fetch waits in the purgatory until a produce to one of its
partitions gives it enough, or ``max_wait_ms`` passes.

Sessions: ``session_id 0, epoch 0`` opens one (its random id comes back; 0 when the cache
keeps every session it has, see :mod:`kcodec.broker.apis.fetch_sessions`); later requests
name it with the next epoch and list only the partitions that changed (and the forgotten
ones); the answer lists only partitions with records, a changed high watermark or log start,
an error or a preferred read replica. ``epoch -1`` is a full fetch without (or closing) a
session. A session is its principal's: to any other it does not exist.

Fetch from follower (KIP-392), as Kafka: a consumer's fetch of v11+ (it carries the client's
``rack_id``) may be served by any replica of the partition, up to the high watermark; older
versions and other brokers' fetches only by the leader, and a node outside the replica set
answers NOT_LEADER_OR_FOLLOWER. With ``replica.selector.class`` set to Kafka's rack-aware
selector, the leader answers a consumer in another rack than its own, when a running
replica is in the consumer's rack and holds the fetch offset, with that replica as
``preferred_read_replica`` and no records (at once, without waiting for ``min_bytes``); the
client then fetches from it. The replicas share one log, so a follower is never behind.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed_names, cluster_allowed
from kcodec.broker.apis.fetch_sessions import CachedPartition, FetchSessions
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.log import LogError, down_convert, magic_for_fetch_version
from kcodec.broker.purgatory import Delayed
from kcodec.protocol import ErrorCode, FetchRequest, FetchResponse

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__ = ["FetchSessions", "client_rack"]

F = FetchResponse
_NO_ID = uuid.UUID(int=0)


def _failed(index: int, code: int, **fields: Any) -> Any:
    """A partition answered with an error: empty records, never null, as Kafka sends them
    (librdkafka rejects a whole response whose record set is null)."""
    fields.setdefault("high_watermark", -1)
    return F.PartitionData(partition_index=index, error_code=code, records=b"", **fields)


def client_rack(req: Any) -> str | None:
    """The rack of a consumer's fetch that any replica may serve (KIP-392: v11+ from a
    consumer, replica id -1; "" when the client gave no rack); None for a fetch only the
    leader serves (a broker's, or an older version)."""
    body = req.body
    if req.api_version < 11:
        return None
    replica = body.replica_id if req.api_version < 15 else (
        body.replica_state.replica_id if body.replica_state is not None else -1)
    return (body.rack_id or "") if replica < 0 else None


def _preferred_replica(node: Any, p: Any, offset: int, rack: str) -> int:
    """The replica Kafka's rack-aware selector sends a consumer in ``rack`` to (-1: the
    leader itself): a running replica other than the leader in that rack whose log holds
    ``offset``, unless the leader is in it."""
    cluster = node.cluster
    if not rack or not cluster.rack_aware_selector or cluster.racks[node.id] == rack:
        return -1
    log = p.log
    if not log.log_start_offset <= offset <= log.log_end_offset:
        return -1
    alive = cluster.alive_ids()
    for r in p.replicas:
        if r != p.leader and r in alive and cluster.racks[r] == rack:
            return int(r)
    return -1


def _read_partition(node: Any, topic: str, index: int, offset: int, max_bytes: int,
                    leader_epoch: int, read_committed: bool, min_one: bool, to_magic: int = 2,
                    rack: str | None = None) -> Any:
    state = node.cluster.state
    p = state.partition(topic, index)
    if p is None:
        return _failed(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    # a consumer's fetch (rack not None) may be served by a follower too
    if p.leader != node.id and (rack is None or node.id not in p.replicas):
        return _failed(index, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       current_leader=F.LeaderIdAndEpoch(leader_id=p.leader, leader_epoch=p.leader_epoch))
    if leader_epoch >= 0 and leader_epoch != p.leader_epoch:
        code = (ErrorCode.FENCED_LEADER_EPOCH if leader_epoch < p.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH)
        return _failed(index, code)
    log = p.log
    hw = log.high_watermark
    txns = node.cluster.txns
    lso = txns.stable_offset(topic, index, hw)
    if rack and p.leader == node.id:
        preferred = _preferred_replica(node, p, offset, rack)
        if preferred >= 0:        # the client is sent there, with no records
            return F.PartitionData(partition_index=index, error_code=0, high_watermark=hw,
                                   last_stable_offset=lso, log_start_offset=log.log_start_offset,
                                   records=b"", preferred_read_replica=preferred)
    upper = lso if read_committed else hw   # read_committed stops at the last stable offset
    try:
        records = b""
        if offset != upper or offset < log.log_start_offset:
            records = log.read(offset, max_bytes, upper_bound=upper, min_one=min_one)
            if to_magic < 2 and records:
                # Fetch v0-v3 cannot carry v2 batches: converted as Kafka 3.x did
                records = down_convert(records, to_magic, first_offset=offset)
    except LogError as exc:
        return _failed(index, exc.error_code, high_watermark=hw, last_stable_offset=lso,
                       log_start_offset=log.log_start_offset)
    aborted = None
    if read_committed:
        aborted = [F.AbortedTransaction(producer_id=pid, first_offset=first)
                   for pid, first in txns.aborted(topic, index, offset, upper)]
    return F.PartitionData(partition_index=index, error_code=0, high_watermark=hw,
                           last_stable_offset=lso, log_start_offset=log.log_start_offset,
                           aborted_transactions=aborted, records=records)


def _read_all(node: Any, body: Any, wanted: list[tuple[str, int, int, int, int]],
              to_magic: int = 2, denied: frozenset[str] = frozenset(),
              rack: str | None = None) -> tuple[list, int, bool]:
    """Read every wanted (topic, partition, offset, max bytes, epoch); (results, bytes, answer
    now: an error or a preferred read replica). Topics in ``denied`` (the principal may not
    READ them) are answered TOPIC_AUTHORIZATION_FAILED, unread; ``rack``: see
    :func:`client_rack`."""
    remaining = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
    out = []
    total = 0
    error = False
    read_committed = body.isolation_level == 1
    for topic, index, offset, pmax, epoch in wanted:
        if topic in denied:
            out.append((topic, _failed(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            error = True
            continue
        limit = max(0, min(pmax, remaining))
        pd = _read_partition(node, topic, index, offset, limit, epoch, read_committed,
                             min_one=total == 0, to_magic=to_magic, rack=rack)
        n = len(pd.records) if pd.records else 0
        if n:
            node.metrics.fetched(topic, index, n)
        total += n
        remaining -= n
        error = error or pd.error_code != 0 or pd.preferred_read_replica >= 0
        out.append((topic, pd))
    return out, total, error


def _group(results: list, id_of: dict[str, Any]) -> list:
    topics: OrderedDict[str, list] = OrderedDict()
    for topic, pd in results:
        topics.setdefault(topic, []).append(pd)
    # the name goes out up to v12, the id from v13 (each field is dropped where it is not)
    return [F.FetchableTopicResponse(topic=t, topic_id=id_of.get(t, _NO_ID), partitions=ps)
            for t, ps in topics.items()]


def _unknown_ids(topics: list) -> list:
    """Fetch v13+: the answer for topics named by an id the broker does not know."""
    return [F.FetchableTopicResponse(topic_id=t.topic_id, partitions=[
        _failed(p.partition, ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions]) for t in topics]


class _DelayedFetch(Delayed):
    def __init__(self, node: Any, req: Any, wanted: list, respond: Any) -> None:
        super().__init__()
        self.node, self.req, self.wanted, self.respond = node, req, wanted, respond
        self.rack = client_rack(req)

    def try_complete(self) -> bool:
        results, total, error = _read_all(self.node, self.req.body, self.wanted,
                                          magic_for_fetch_version(self.req.api_version),
                                          rack=self.rack)
        if total >= self.req.body.min_bytes or error:
            return self.complete(self.respond(results))
        return False

    def expire(self) -> None:
        results, _, _ = _read_all(self.node, self.req.body, self.wanted,
                                  magic_for_fetch_version(self.req.api_version), rack=self.rack)
        self.complete(self.respond(results))


def _denied(node: Any, req: Any, wanted: list) -> frozenset[str]:
    """The topics of ``wanted`` this fetch may not read: a consumer needs READ on each; a
    follower (a replica id) CLUSTER_ACTION on the cluster."""
    if node.cluster.authorizer is None:
        return frozenset()
    body = req.body
    replica = body.replica_id if req.api_version < 15 else (
        body.replica_state.replica_id if body.replica_state is not None else -1)
    topics = {w[0] for w in wanted}
    if replica >= 0:
        return frozenset() if cluster_allowed(node, req, Op.CLUSTER_ACTION) else frozenset(topics)
    return frozenset(topics - allowed_names(node, req, Op.READ, RT.TOPIC, topics))


@api(FetchRequest, 0, 17)
def fetch(node: Node, req: Incoming[FetchRequest]) -> Answer[FetchResponse]:
    body = req.body
    v = req.api_version
    # v13+ names topics by id (KIP-516): map them to names; unknown ids are answered apart
    names: dict[Any, str] = {}
    id_of: dict[str, Any] = {}
    if v >= 13:
        for name, topic in list(node.cluster.state.topics.items()):
            names[topic.topic_id] = name
            id_of[name] = topic.topic_id
    unknown = [t for t in body.topics if t.topic_id not in names] if v >= 13 else []

    def name_of(t: Any) -> Any:      # the topic's name, None for an unknown id
        return t.topic if v < 13 else names.get(t.topic_id)
    session = None
    new_session = False
    sessions: FetchSessions = node.fetch_sessions
    principal = req.connection.principal
    if v >= 7 and (body.session_id != 0 or body.session_epoch != -1):
        if body.session_epoch == -1:
            sessions.close(body.session_id, principal)
        elif body.session_id == 0:
            if body.session_epoch != 0:
                return F(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
            session = sessions.new(principal, [
                ((name_of(t), p.partition), CachedPartition(p.fetch_offset, p.partition_max_bytes))
                for t in body.topics if name_of(t) is not None for p in t.partitions])
            new_session = True
        else:
            session = sessions.get(body.session_id, principal)
            if session is None:
                return F(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
            if body.session_epoch != session.epoch:
                return F(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    epochs: dict[tuple[str, int], int] = {}
    if session is None or new_session:
        wanted = [(name_of(t), p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
                  for t in body.topics if name_of(t) is not None for p in t.partitions]
    else:
        with sessions.lock:
            session.epoch = session.epoch + 1 if session.epoch < 0x7FFFFFFF else 1
            for gone in body.forgotten_topics_data:
                for idx in gone.partitions:
                    session.parts.pop((name_of(gone), idx), None)
            for t in body.topics:
                if name_of(t) is None:
                    continue
                for p in t.partitions:
                    key = (name_of(t), p.partition)
                    prev = session.parts.get(key)
                    session.parts[key] = CachedPartition(
                        p.fetch_offset, p.partition_max_bytes,
                        prev.high_watermark if prev else -2, prev.log_start_offset if prev else -2)
                    epochs[key] = p.current_leader_epoch
            wanted = [(k[0], k[1], st.fetch_offset, st.max_bytes, epochs.get(k, -1))
                      for k, st in session.parts.items()]
    sid = session.id if session is not None else 0

    def respond(results: list) -> Any:
        if session is not None and not new_session:
            keep = []
            with sessions.lock:
                for topic, pd in results:
                    st = session.parts.get((topic, pd.partition_index))
                    changed = (pd.error_code != 0 or bool(pd.records) or st is None
                               or pd.preferred_read_replica >= 0
                               or st.high_watermark != pd.high_watermark
                               or st.log_start_offset != pd.log_start_offset)
                    if st is not None:
                        st.high_watermark, st.log_start_offset = (pd.high_watermark,
                                                                  pd.log_start_offset)
                    if changed:
                        keep.append((topic, pd))
            results = keep
        elif session is not None:
            with sessions.lock:
                for topic, pd in results:
                    st = session.parts.get((topic, pd.partition_index))
                    if st is not None:
                        st.high_watermark, st.log_start_offset = (pd.high_watermark,
                                                                  pd.log_start_offset)
        return F(error_code=0, session_id=sid, responses=_group(results, id_of) + _unknown_ids(unknown))

    denied = _denied(node, req, wanted)
    rack = client_rack(req)
    if denied:     # answered at once (an error in the answer ends a long poll anyway)
        results, _, _ = _read_all(node, body, wanted, magic_for_fetch_version(v), denied, rack)
        return respond(results)
    results, total, error = _read_all(node, body, wanted, magic_for_fetch_version(v), rack=rack)
    if total >= body.min_bytes or error or body.max_wait_ms <= 0 or not wanted or unknown:
        return respond(results)
    op = _DelayedFetch(node, req, wanted, respond)
    return node.cluster.purgatory.watch(op, [(w[0], w[1]) for w in wanted], body.max_wait_ms / 1000)

