"""What the API handlers ask of the authorizer: may this request's principal, from its
host, do an operation on a resource? With no authorizer on the cluster every answer is yes
(as a Kafka broker without ``authorizer.class.name``), at the cost of one attribute look-up.

Which operation on which resource each API needs (Kafka's KafkaApis):

======================  ===================================================================
API                     needs
======================  ===================================================================
Produce                 WRITE on the topic; WRITE on the transactional id for
                        transactional batches
Fetch                   READ on the topic (a follower: CLUSTER_ACTION on the cluster)
ListOffsets,            DESCRIBE on the topic (OffsetForLeaderEpoch: or CLUSTER_ACTION)
OffsetForLeaderEpoch
Metadata                DESCRIBE on each topic (unauthorized ones left out of an all-topics
                        answer); auto-creation CREATE on the cluster or the topic
CreateTopics            CREATE on the cluster or the topic; configs shown with
                        DESCRIBE_CONFIGS
DeleteTopics,           DELETE on the topic
DeleteRecords
CreatePartitions        ALTER on the topic
Describe/AlterConfigs   DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster
                        for a broker
FindCoordinator         DESCRIBE on the group or the transactional id
Join/Sync/Heartbeat/    READ on the group (ConsumerGroupHeartbeat too)
LeaveGroup
OffsetCommit            READ on the group and READ on each topic
OffsetFetch             DESCRIBE on the group and on each topic
OffsetDelete            DELETE on the group, READ on each topic
DescribeGroups,         DESCRIBE on each group (ListGroups: all with DESCRIBE on the
ListGroups              cluster, else those the principal may describe)
DeleteGroups            DELETE on the group
InitProducerId          WRITE on the transactional id; for an idempotent producer
                        IDEMPOTENT_WRITE on the cluster or WRITE on some topic
AddPartitionsToTxn,     WRITE on the transactional id (and WRITE on each topic; READ on the
AddOffsetsToTxn,        group for AddOffsetsToTxn and TxnOffsetCommit, READ on each topic
EndTxn,                 for TxnOffsetCommit)
TxnOffsetCommit
WriteTxnMarkers         CLUSTER_ACTION on the cluster
ShareGroupHeartbeat     READ on the group (DESCRIBE on each subscribed topic)
ShareFetch,             READ on the group and READ on each topic
ShareAcknowledge
ShareGroupDescribe,     DESCRIBE on the group (and on each topic for the offsets)
DescribeShareGroup-
Offsets
AlterShareGroupOffsets  READ on the group and READ on each topic
DeleteShareGroupOffsets DELETE on the group and READ on each topic
DescribeAcls            DESCRIBE on the cluster
CreateAcls, DeleteAcls  ALTER on the cluster
======================  ===================================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kcodec.broker.authorizer import all_operations
from kcodec.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["allowed", "allowed_names", "cluster_allowed", "any_allowed", "operations",
           "Op", "RT"]

Op = AclOperation
RT = ResourceType


def allowed(node: Any, req: Any, op: AclOperation, rtype: ResourceType, name: str, *,
            log_denial: bool = True) -> bool:
    auth = node.cluster.authorizer
    if auth is None:
        return True
    conn = req.connection
    return bool(auth.authorize(conn.principal, conn.host, op, rtype, name,
                               log_denial=log_denial))


def cluster_allowed(node: Any, req: Any, op: AclOperation, *, log_denial: bool = True) -> bool:
    return allowed(node, req, op, RT.CLUSTER, CLUSTER_NAME, log_denial=log_denial)


def allowed_names(node: Any, req: Any, op: AclOperation, rtype: ResourceType,
                  names: Iterable[str | None], *, log_denial: bool = True) -> set[str]:
    """The names (of those given; None skipped) the request may do ``op`` on."""
    wanted = {n for n in names if n is not None}
    auth = node.cluster.authorizer
    if auth is None:
        return wanted
    conn = req.connection
    return {n for n in wanted
            if auth.authorize(conn.principal, conn.host, op, rtype, n, log_denial=log_denial)}


def any_allowed(node: Any, req: Any, op: AclOperation, rtype: ResourceType) -> bool:
    """May the request do ``op`` on at least one resource of the type?"""
    auth = node.cluster.authorizer
    if auth is None:
        return True
    conn = req.connection
    return bool(auth.authorize_any(conn.principal, conn.host, op, rtype))


def operations(node: Any, req: Any, rtype: ResourceType, name: str) -> int:
    """The "authorized operations" bit field of a resource for this request."""
    auth = node.cluster.authorizer
    if auth is None:
        return all_operations(rtype)
    conn = req.connection
    return int(auth.authorized_operations(conn.principal, conn.host, rtype, name))
