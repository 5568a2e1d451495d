"""The requests the client sends, as typed protocol objects (``kcodec.protocol``).

One small builder per request, taking plain Python values and returning the generated
message class with its nested structs filled in (the spec's names; an unknown field is a
``TypeError`` there). Fields a negotiated version lacks are left out when the request is
encoded (kcodec.client.net.wire), as franz-go's kmsg writes only a version's fields, so a
builder fills in everything the client knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from kcodec.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeGroupsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from kcodec.protocol.acl import AclBinding, AclBindingFilter

__all__ = [
    "api_versions", "metadata", "find_coordinator", "produce", "fetch", "list_offsets",
    "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit", "offset_fetch",
    "consumer_group_heartbeat", "init_producer_id", "add_partitions_to_txn",
    "add_offsets_to_txn", "end_txn", "txn_offset_commit", "create_topics", "delete_topics",
    "list_groups", "describe_groups", "consumer_group_describe", "sasl_handshake",
    "sasl_authenticate", "GROUP", "TRANSACTION",
]

GROUP, TRANSACTION = 0, 1          # FindCoordinator key types
_NO_TOPIC_ID = UUID(int=0)


def _group_by_topic(items: Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for topic, item in items:
        out.setdefault(topic, []).append(item)
    return out


# ---------------------------------------------------------------------- connection
def api_versions(version: int, software_version: str) -> ApiVersionsRequest:
    if version >= 3:
        return ApiVersionsRequest(client_software_name="kcodec",
                                  client_software_version=software_version)
    return ApiVersionsRequest()


def sasl_handshake(mechanism: str) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(mechanism=mechanism)


def sasl_authenticate(auth_bytes: bytes) -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(auth_bytes=auth_bytes)


def metadata(topics: Iterable[str] | None, auto_create: bool) -> MetadataRequest:
    """Metadata of ``topics`` (None: every topic)."""
    T = MetadataRequest.MetadataRequestTopic
    return MetadataRequest(topics=None if topics is None else [T(name=t) for t in topics],
                           allow_auto_topic_creation=auto_create)


def find_coordinator(key: str, key_type: int = GROUP) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key=key, key_type=key_type)


# ---------------------------------------------------------------------- produce and fetch
def produce(transactional_id: str | None, acks: int, timeout_ms: int,
            batches: Iterable[tuple[str, int, Any]],
            topic_ids: Mapping[str, UUID] | None) -> ProduceRequest:
    """``batches``: (topic, partition, records bytes); topics by id where ``topic_ids``
    has them (KIP-516, Produce v13+)."""
    T, P = ProduceRequest.TopicProduceData, ProduceRequest.PartitionProduceData
    by = _group_by_topic((t, P(index=p, records=r)) for t, p, r in batches)
    return ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
        topic_data=[T(name=t, topic_id=topic_ids[t] if topic_ids else _NO_TOPIC_ID,
                      partition_data=ps) for t, ps in by.items()])


def fetch(*, max_wait_ms: int, min_bytes: int, max_bytes: int, read_committed: bool,
          session_id: int, session_epoch: int, partitions: Iterable[tuple[str, int, int]],
          partition_max_bytes: int, forgotten: Iterable[tuple[str, int]] = (),
          topic_ids: Mapping[str, UUID] | None = None) -> FetchRequest:
    """A consumer's Fetch: ``partitions`` (topic, partition, fetch offset), ``forgotten``
    (topic, partition) leaving the session; topics by id where ``topic_ids`` has them."""
    T, P, F = FetchRequest.FetchTopic, FetchRequest.FetchPartition, FetchRequest.ForgottenTopic

    def tid(t: str) -> UUID:
        return topic_ids[t] if topic_ids else _NO_TOPIC_ID
    want = _group_by_topic(
        (t, P(partition=p, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1,
              log_start_offset=-1, partition_max_bytes=partition_max_bytes))
        for t, p, off in partitions)
    gone = _group_by_topic(forgotten)
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=1 if read_committed else 0, session_id=session_id,
        session_epoch=session_epoch,
        topics=[T(topic=t, topic_id=tid(t), partitions=ps) for t, ps in want.items()],
        forgotten_topics_data=[F(topic=t, topic_id=tid(t), partitions=ps)
                               for t, ps in gone.items()],
        rack_id="")


def list_offsets(partitions: Iterable[tuple[str, int, int]],
                 read_committed: bool) -> ListOffsetsRequest:
    """``partitions``: (topic, partition, timestamp: -2 earliest, -1 latest, or ms)."""
    T, P = ListOffsetsRequest.ListOffsetsTopic, ListOffsetsRequest.ListOffsetsPartition
    by = _group_by_topic((t, P(partition_index=p, current_leader_epoch=-1, timestamp=ts))
                         for t, p, ts in partitions)
    return ListOffsetsRequest(replica_id=-1, isolation_level=1 if read_committed else 0,
                              topics=[T(name=t, partitions=ps) for t, ps in by.items()])


# ---------------------------------------------------------------------- classic groups
def join_group(group_id: str, member_id: str, instance_id: str | None,
               session_timeout_ms: int, rebalance_timeout_ms: int,
               protocols: Iterable[tuple[str, bytes]]) -> JoinGroupRequest:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(
        group_id=group_id, session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer",
        protocols=[P(name=n, metadata=m) for n, m in protocols], reason=None)


def sync_group(group_id: str, generation: int, member_id: str, instance_id: str | None,
               protocol: str | None, assignments: Iterable[tuple[str, bytes]]) -> SyncGroupRequest:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(
        group_id=group_id, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name=protocol,
        assignments=[A(member_id=m, assignment=a) for m, a in assignments])


def heartbeat(group_id: str, generation: int, member_id: str,
              instance_id: str | None) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=member_id,
                            group_instance_id=instance_id)


def leave_group(group_id: str, member_id: str, instance_id: str | None,
                reason: str) -> LeaveGroupRequest:
    M = LeaveGroupRequest.MemberIdentity
    return LeaveGroupRequest(group_id=group_id, member_id=member_id,
                             members=[M(member_id=member_id, group_instance_id=instance_id,
                                        reason=reason)])


def offset_commit(group_id: str, generation_or_epoch: int, member_id: str,
                  instance_id: str | None,
                  offsets: Iterable[tuple[str, int, int]]) -> OffsetCommitRequest:
    """``offsets``: (topic, partition, offset)."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = OffsetCommitRequest.OffsetCommitRequestPartition
    by = _group_by_topic((t, P(partition_index=p, committed_offset=off,
                               committed_leader_epoch=-1, committed_metadata=""))
                         for t, p, off in offsets)
    return OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=generation_or_epoch,
        member_id=member_id, group_instance_id=instance_id,
        topics=[T(name=t, partitions=ps) for t, ps in by.items()])


def offset_fetch(group_id: str, partitions: Mapping[str, Iterable[int]] | None,
                 require_stable: bool = False) -> OffsetFetchRequest:
    """Committed offsets of ``partitions`` ({topic: partitions}; None: all the group has).
    ``require_stable`` (KIP-447): a partition with offsets waiting in an open transaction
    answers UNSTABLE_OFFSET_COMMIT."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = None if partitions is None else [
        T(name=t, partition_indexes=list(ps)) for t, ps in partitions.items()]
    return OffsetFetchRequest(group_id=group_id, topics=topics, require_stable=require_stable)


# ---------------------------------------------------------------------- consumer groups (KIP-848)
def consumer_group_heartbeat(group_id: str, member_id: str, member_epoch: int,
                             instance_id: str | None, rebalance_timeout_ms: int,
                             topics: list[str] | None, assignor: str | None,
                             owned: Mapping[UUID, Iterable[int]] | None,
                             regex: str | None = None) -> ConsumerGroupHeartbeatRequest:
    """``topics``/``owned``/``regex`` None: unchanged since the last heartbeat (not sent).
    The subscription goes as names and regex together ("": no regex; a pattern with no
    names), as Kafka's and librdkafka's clients send it."""
    TP = ConsumerGroupHeartbeatRequest.TopicPartitions
    return ConsumerGroupHeartbeatRequest(
        group_id=group_id, member_id=member_id, member_epoch=member_epoch,
        instance_id=instance_id, rack_id=None, rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=topics, subscribed_topic_regex=regex, server_assignor=assignor,
        topic_partitions=None if owned is None else [
            TP(topic_id=t, partitions=sorted(ps)) for t, ps in owned.items()])


# ---------------------------------------------------------------------- producer ids, transactions
def init_producer_id(transactional_id: str | None, transaction_timeout_ms: int, *,
                     two_phase: bool = False, keep_prepared: bool = False
                     ) -> InitProducerIdRequest:
    """``two_phase``/``keep_prepared``: KIP-939's Enable2Pc and KeepPreparedTxn (v6)."""
    return InitProducerIdRequest(transactional_id=transactional_id,
                                 transaction_timeout_ms=transaction_timeout_ms,
                                 enable2_pc=two_phase, keep_prepared_txn=keep_prepared)


def add_partitions_to_txn(transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> AddPartitionsToTxnRequest:
    """The client's form (v0-3), as Java's producer sends it."""
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    by = _group_by_topic(partitions)
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in by.items()])


def add_offsets_to_txn(transactional_id: str, producer_id: int, epoch: int,
                       group_id: str) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                  producer_epoch=epoch, group_id=group_id)


def end_txn(transactional_id: str, producer_id: int, epoch: int,
            commit: bool) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                         producer_epoch=epoch, committed=commit)


def txn_offset_commit(transactional_id: str, group_id: str, producer_id: int, epoch: int,
                      generation: int, member_id: str, instance_id: str | None,
                      offsets: Iterable[tuple[str, int, int, str | None]]
                      ) -> TxnOffsetCommitRequest:
    """``offsets``: (topic, partition, offset, metadata)."""
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
    by = _group_by_topic((t, P(partition_index=p, committed_offset=off, committed_metadata=meta))
                         for t, p, off, meta in offsets)
    return TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=group_id, producer_id=producer_id,
        producer_epoch=epoch, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id,
        topics=[T(name=t, partitions=ps) for t, ps in by.items()])


# ---------------------------------------------------------------------- admin
def create_topics(topics: Iterable[tuple[str, int, int, Mapping[str, str]]], timeout_ms: int,
                  validate_only: bool) -> CreateTopicsRequest:
    """``topics``: (name, partitions, replication factor, configs); -1: the broker's."""
    T, C = CreateTopicsRequest.CreatableTopic, CreateTopicsRequest.CreatableTopicConfig
    return CreateTopicsRequest(
        topics=[T(name=n, num_partitions=p, replication_factor=r, assignments=[],
                  configs=[C(name=k, value=v) for k, v in cfg.items()])
                for n, p, r, cfg in topics],
        timeout_ms=timeout_ms, validate_only=validate_only)


def delete_topics(names: Iterable[str], timeout_ms: int) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)


def list_groups() -> ListGroupsRequest:
    return ListGroupsRequest(states_filter=[], types_filter=[])


def describe_groups(group_ids: Iterable[str]) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(groups=list(group_ids), include_authorized_operations=False)


def consumer_group_describe(group_ids: Iterable[str]) -> ConsumerGroupDescribeRequest:
    return ConsumerGroupDescribeRequest(group_ids=list(group_ids),
                                        include_authorized_operations=False)


def create_acls(acls: Iterable[AclBinding]) -> CreateAclsRequest:
    C = CreateAclsRequest
    return C(creations=[C.AclCreation(
        resource_type=a.resource_type, resource_name=a.resource_name,
        resource_pattern_type=a.pattern_type, principal=a.principal, host=a.host,
        operation=a.operation, permission_type=a.permission) for a in acls])


def describe_acls(f: AclBindingFilter) -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
        pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
        operation=f.operation, permission_type=f.permission)


def delete_acls(filters: Iterable[AclBindingFilter]) -> DeleteAclsRequest:
    D = DeleteAclsRequest
    return D(filters=[D.DeleteAclsFilter(
        resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
        pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
        operation=f.operation, permission_type=f.permission) for f in filters])
