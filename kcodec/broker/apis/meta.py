"""ApiVersions, Metadata (with optional topic auto-creation) and DescribeCluster."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed, allowed_names, cluster_allowed, operations
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.apis.topics import default_replication_factor
from kcodec.broker.apis.util import valid_topic_name
from kcodec.broker.log import LogError
from kcodec.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    ErrorCode,
    MetadataRequest,
    MetadataResponse,
)
from kcodec.protocol.acl import CLUSTER_NAME

if TYPE_CHECKING:
    from kcodec.broker.node import Node

log = logging.getLogger(__name__)

__all__: list[str] = []


@api(ApiVersionsRequest, 0, 4)
def api_versions(node: Node, req: Incoming[ApiVersionsRequest]) -> Answer[ApiVersionsResponse]:
    from kcodec.broker.apis import advertised_versions

    R = ApiVersionsResponse
    # v3+ carries features: transaction.version (KIP-890) is finalized at the cluster's level,
    # which is how a client learns whether transactions v2 may be used
    level = node.cluster.transaction_version
    if req.api_version >= 3:     # who the client is, for KIP-714's subscription matching
        req.connection.attrs["client_software"] = (req.body.client_software_name,
                                                   req.body.client_software_version)
    return R(error_code=0, api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                     for k, (lo, hi) in sorted(advertised_versions(node).items())],
             supported_features=[R.SupportedFeatureKey(name="transaction.version", min_version=0,
                                                       max_version=2)],
             finalized_features_epoch=1 if level else -1,
             finalized_features=[R.FinalizedFeatureKey(name="transaction.version",
                                                       min_version_level=level,
                                                       max_version_level=level)]
             if level else [])


def listener_of(req: Any) -> str | None:
    """The listener the request came through (None: the node's first)."""
    return getattr(req.connection, "listener", None)


def _brokers(node: Any, req: Any) -> list[tuple[int, str, int, str | None]]:
    """Every live node's address on the request's listener (nodes without it left out), and
    its rack."""
    name = listener_of(req) or node.listeners[0].name
    racks = node.cluster.racks
    return [(n.id, *n.address_of(name), racks[n.id]) for n in node.cluster.live_nodes()
            if n.listener(name) is not None]


@api(MetadataRequest, 0, 12)
def metadata(node: Node, req: Incoming[MetadataRequest]) -> Answer[MetadataResponse]:
    M = MetadataResponse
    state = node.cluster.state
    body = req.body
    v = req.api_version
    every = body.topics is None or (v == 0 and not body.topics)
    by_id: dict[str, Any] = {}          # name -> the id it was asked by (v10+)
    if every:
        names: list[str | None] = sorted(state.topics)
    else:
        # v10+: a topic may be asked for by id alone (KIP-516; KIP-848 consumers do)
        ids = {t.topic_id: t.name for t in state.topics.values()} if v >= 10 else {}
        names = []
        for t in body.topics or ():
            name = t.name if t.name is not None or v < 10 else ids.get(t.topic_id)
            if t.name is None and name is not None:
                by_id[name] = t.topic_id
            names.append(name)
    # a topic the principal may not describe is left out of an all-topics answer, and is
    # TOPIC_AUTHORIZATION_FAILED when asked for (by name: nothing said about whether it exists)
    describable = allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, names, log_denial=not every)
    auto = state.auto_create_topics and (v < 4 or body.allow_auto_topic_creation)
    with_ops = v >= 8 and body.include_topic_authorized_operations
    alive = node.cluster.alive_ids()
    topics = []
    for name in names:
        if name is None:
            topics.append(M.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None))
            continue
        if name not in describable:
            if not every:
                topics.append(M.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    name=None if name in by_id else name,
                    topic_id=by_id.get(name, M.MetadataResponseTopic().topic_id)))
            continue
        topic = state.topics.get(name)
        if topic is None and auto and valid_topic_name(name) is None:
            if not (cluster_allowed(node, req, Op.CREATE, log_denial=False)
                    or allowed(node, req, Op.CREATE, RT.TOPIC, name)):
                topics.append(M.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name))
                continue
            with state.lock:
                try:
                    topic = state.topics.get(name) or state.create_topic(
                        name, state.num_partitions,
                        replication_factor=default_replication_factor(node.cluster))
                except (LogError, OSError) as exc:
                    log.warning("kcodec broker: cannot auto-create topic %r: %s", name, exc)
                    topics.append(M.MetadataResponseTopic(
                        error_code=getattr(exc, "error_code", ErrorCode.KAFKA_STORAGE_ERROR),
                        name=name))
                    continue
        if topic is None:
            code = valid_topic_name(name) is None and ErrorCode.UNKNOWN_TOPIC_OR_PARTITION \
                or ErrorCode.INVALID_TOPIC_EXCEPTION
            topics.append(M.MetadataResponseTopic(error_code=code, name=name))
            continue
        parts = []
        for p in sorted(topic.partitions.values(), key=lambda p: p.index):
            up = p.leader in alive
            replicas = list(p.replicas)
            parts.append(M.MetadataResponsePartition(
                error_code=0 if up else ErrorCode.LEADER_NOT_AVAILABLE, partition_index=p.index,
                leader_id=p.leader if up else -1, leader_epoch=p.leader_epoch,
                replica_nodes=replicas, isr_nodes=[r for r in replicas if r in alive],
                offline_replicas=[r for r in replicas if r not in alive]))
        entry = M.MetadataResponseTopic(error_code=0, name=name, topic_id=topic.topic_id,
                                        partitions=parts)
        if with_ops:
            entry.topic_authorized_operations = operations(node, req, RT.TOPIC, name)
        topics.append(entry)
    out = M(brokers=[M.MetadataResponseBroker(node_id=i, host=h, port=port, rack=rack)
                     for i, h, port, rack in _brokers(node, req)],
            cluster_id=state.cluster_id, controller_id=node.cluster.controller_id(),
            topics=topics)
    if 8 <= v <= 10 and body.include_cluster_authorized_operations:
        out.cluster_authorized_operations = _cluster_operations(node, req)
    return out


def _cluster_operations(node: Any, req: Any) -> int:
    """What the principal may do to the cluster (0 without DESCRIBE on it, as Kafka)."""
    if not cluster_allowed(node, req, Op.DESCRIBE, log_denial=False):
        return 0
    return operations(node, req, RT.CLUSTER, CLUSTER_NAME)


@api(DescribeClusterRequest, 0, 1)
def describe_cluster(node: Node, req: Incoming[DescribeClusterRequest]
                    ) -> Answer[DescribeClusterResponse]:
    D = DescribeClusterResponse
    out = D(error_code=0, cluster_id=node.cluster.state.cluster_id,
            controller_id=node.cluster.controller_id(),
            brokers=[D.DescribeClusterBroker(broker_id=i, host=h, port=p, rack=rack)
                     for i, h, p, rack in _brokers(node, req)])
    if req.body.include_cluster_authorized_operations:
        out.cluster_authorized_operations = _cluster_operations(node, req)
    return out
