"""CreateTopics, DeleteTopics, CreatePartitions (replica sets kept, their replicas sharing
one log: see :mod:`kcodec.broker.state`).

One CreateTopics or CreatePartitions request makes at most ``MAX_RECORDS_PER_REQUEST``
topics and partitions together, as Kafka's controller bounds one operation to 10,000
metadata records: a bigger one (one request asking for millions of partitions made the
broker allocate until it stalled) fails whole with POLICY_VIOLATION.

The client's ``controller_mutation_rate`` (KIP-599, ``kcodec.broker.config.quotas``) is
applied to each topic that would otherwise be created, grown or deleted, last, as Kafka's
controller does: the partitions it creates, adds or deletes. From CreateTopics v6,
CreatePartitions v3 and DeleteTopics v5 a topic that finds the quota spent is
THROTTLING_QUOTA_EXCEEDED; before, it is done and the answer throttled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed_names, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.apis.util import quota_client, valid_topic_name
from kcodec.broker.log import LogError
from kcodec.protocol import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ErrorCode,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__ = ["create_topic"]

E = ErrorCode
MAX_RECORDS_PER_REQUEST = 10_000
TOO_LARGE = "Unable to perform excessively large batch operation."
#: Kafka's message for THROTTLING_QUOTA_EXCEEDED
QUOTA_EXCEEDED = "The throttling quota has been exceeded."


class _Mutations:
    """The controller mutation quota of one request: ``admit(partitions)`` before a topic's
    mutations; the throttle time goes to the request for the answer."""

    def __init__(self, node: Node, req: Incoming[Any], strict_since: int) -> None:
        self.quotas = node.cluster.client_quotas
        self.req = req
        self.user, self.client_id = quota_client(req)
        self.strict = req.api_version >= strict_since

    def admit(self, partitions: int) -> bool:
        ok, ms = self.quotas.mutate(self.user, self.client_id, partitions, self.strict)
        if ms > 0:      # the latest, as Kafka keeps it
            self.req.quota_throttle_ms = ms
        return ok


def default_replication_factor(cluster: Any) -> int:
    """The replication factor of a topic created without one: ``default.replication.factor``,
    capped at the cluster's node count (so that a default set for a 3-node cluster still
    lets a 1-node one auto-create topics)."""
    return max(1, min(int(cluster.config["default.replication.factor"]), len(cluster.nodes)))


def create_topic(cluster: Any, name: str, partitions: int, replication: int,
                 configs: dict[str, str], leaders: dict[int, int] | None = None,
                 validate_only: bool = False, small_segments: bool = False,
                 admit: Callable[[int], bool] | None = None,
                 assignments: dict[int, list[int]] | None = None) -> tuple[int, str | None]:
    """``(error_code, message)`` after creating one topic (``replication`` -1: the default
    replication factor; ``assignments``: partition -> its replica set, the leader first, as
    CreateTopics gives them; ``small_segments``: segment.bytes may be below 1 MiB, for tests;
    ``admit``: asked, once all else is checked, whether its partitions may be created, the
    controller mutation quota)."""
    state = cluster.state
    why = valid_topic_name(name)
    if why is not None:
        return E.INVALID_TOPIC_EXCEPTION, why
    if partitions == -1:
        partitions = state.num_partitions
    if partitions <= 0:
        return E.INVALID_PARTITIONS, f"number of partitions {partitions} must be positive"
    if replication == 0 or replication < -1 or replication > len(cluster.nodes):
        return E.INVALID_REPLICATION_FACTOR, (
            f"replication factor {replication}: this cluster has {len(cluster.nodes)} node(s)")
    if replication == -1:
        replication = default_replication_factor(cluster)
    if assignments is not None:
        if sorted(assignments) != list(range(len(assignments))):
            return E.INVALID_REPLICA_ASSIGNMENT, ("the assignments must name partitions 0 to "
                                                  f"{len(assignments) - 1}, each once")
        for i, replicas in assignments.items():
            if not replicas or len(set(replicas)) != len(replicas):
                return E.INVALID_REPLICA_ASSIGNMENT, (
                    f"partition {i}: a replica set needs at least one node, none twice "
                    f"(got {replicas})")
            if any(n not in cluster.nodes for n in replicas):
                return E.INVALID_REPLICA_ASSIGNMENT, (
                    f"partition {i}: the assignment {replicas} names a node this cluster "
                    f"does not have (its nodes: {sorted(cluster.nodes)})")
        if len({len(r) for r in assignments.values()}) > 1:
            return E.INVALID_REPLICA_ASSIGNMENT, ("every partition's replica set must have "
                                                  "the same size")
    from kcodec.broker.apis.configs import check_topic_configs

    code, msg = check_topic_configs(cluster, configs, small_segments)
    if code:
        return code, msg
    with state.lock:
        if name in state.topics:
            return E.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
        if leaders and any(n not in cluster.nodes for n in leaders.values()):
            return E.INVALID_REPLICA_ASSIGNMENT, "an assignment names an unknown node"
        if not validate_only:
            if admit is not None and not admit(partitions):
                return E.THROTTLING_QUOTA_EXCEEDED, QUOTA_EXCEEDED
            try:     # all partitions or none; refused past the descriptor budget
                state.create_topic(name, partitions, configs, leaders, replication,
                                   assignments)
            except LogError as exc:
                return exc.error_code, str(exc)
            except OSError as exc:
                return E.KAFKA_STORAGE_ERROR, f"cannot create the partitions: {exc.strerror or exc}"
    return 0, None


@api(CreateTopicsRequest, 0, 7)
def create_topics(node: Node, req: Incoming[CreateTopicsRequest]) -> Answer[CreateTopicsResponse]:
    R = CreateTopicsResponse
    names = [t.name for t in req.body.topics]
    creatable = set(names) if cluster_allowed(node, req, Op.CREATE, log_denial=False) else \
        allowed_names(node, req, Op.CREATE, RT.TOPIC, names)
    # the configs of a new topic are shown only to who may describe them
    shown = allowed_names(node, req, Op.DESCRIBE_CONFIGS, RT.TOPIC, names, log_denial=False)
    default = node.cluster.state.num_partitions
    records = sum(1 + (len(t.assignments) if t.assignments else
                       t.num_partitions if t.num_partitions > 0 else default)
                  for t in req.body.topics)
    if records > MAX_RECORDS_PER_REQUEST:
        return R(topics=[R.CreatableTopicResult(name=t.name, error_code=E.POLICY_VIOLATION,
                                                error_message=TOO_LARGE)
                         for t in req.body.topics])
    mutations = _Mutations(node, req, 6)
    out = []
    for t in req.body.topics:
        if t.name not in creatable:
            out.append(R.CreatableTopicResult(
                name=t.name, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                error_message="Authorization failed: CREATE on the cluster or the topic needed",
                topic_config_error_code=0 if t.name in shown else E.TOPIC_AUTHORIZATION_FAILED))
            continue
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        partitions, rf = t.num_partitions, t.replication_factor
        assignments = None
        if t.assignments:
            if partitions != -1 or rf != -1:
                # as Kafka: an assignment replaces both counts, which must then be -1
                which = "numPartitions" if partitions != -1 else "replicationFactor"
                out.append(R.CreatableTopicResult(
                    name=t.name, error_code=E.INVALID_REQUEST,
                    error_message=f"A manual partition assignment was specified, but {which} "
                                  f"was not set to -1."))
                continue
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            partitions = len(t.assignments)
            rf = len(t.assignments[0].broker_ids) or -1
        code, msg = create_topic(node.cluster, t.name, partitions, rf, configs, None,
                                 req.body.validate_only, admit=mutations.admit,
                                 assignments=assignments)
        topic = node.cluster.state.topics.get(t.name)
        res = R.CreatableTopicResult(name=t.name, error_code=code, error_message=msg)
        if t.name not in shown:
            res.topic_config_error_code = E.TOPIC_AUTHORIZATION_FAILED
        if code == 0 and topic is not None:
            res.topic_id = topic.topic_id
            res.num_partitions = len(topic.partitions)
            res.replication_factor = len(topic.partitions[0].replicas) if topic.partitions else 1
            res.configs = [] if t.name not in shown else _configs_of(node.cluster, topic)
        out.append(res)
    return R(topics=out)


def _configs_of(cluster: Any, topic: Any) -> list:
    """A new topic's configs as CreateTopics v5+ answers them (value, source)."""
    from kcodec.broker.apis.configs import broker_levels
    from kcodec.broker.config.topic import describe

    R = CreateTopicsResponse
    return [R.CreatableTopicConfigs(name=d.name, value=d.value, read_only=False,
                                    config_source=d.source, is_sensitive=False)
            for d in describe(topic.configs, broker_levels(cluster))]


@api(DeleteTopicsRequest, 0, 6)
def delete_topics(node: Node, req: Incoming[DeleteTopicsRequest]) -> Answer[DeleteTopicsResponse]:
    R = DeleteTopicsResponse
    state = node.cluster.state
    by_id: set[str] = set()              # names found from the ids asked for
    if req.api_version >= 6:
        names = []
        for t in req.body.topics:
            if t.name is None:
                found = [x.name for x in state.topics.values() if x.topic_id == t.topic_id]
                names.append(found[0] if found else None)
                by_id.update(found[:1])
            else:
                names.append(t.name)
    else:
        names = list(req.body.topic_names)
    describable = allowed_names(node, req, Op.DESCRIBE, RT.TOPIC, by_id, log_denial=False)
    deletable = allowed_names(node, req, Op.DELETE, RT.TOPIC, names)
    mutations = _Mutations(node, req, 5)
    out = []
    for name in names:
        if name in by_id and name not in describable:
            # asked by id and not to be described: the name stays unsaid
            topic = state.topics.get(name)
            out.append(R.DeletableTopicResult(name=None, topic_id=topic.topic_id if topic else
                                              R.DeletableTopicResult().topic_id,
                                              error_code=E.TOPIC_AUTHORIZATION_FAILED))
            continue
        if name is not None and name not in deletable:
            out.append(R.DeletableTopicResult(name=name, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                              error_message="DELETE on the topic needed"))
            continue
        topic = state.topics.get(name) if name is not None else None
        if topic is None:
            out.append(R.DeletableTopicResult(name=name, error_code=E.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        if not mutations.admit(len(topic.partitions)):
            out.append(R.DeletableTopicResult(name=name, topic_id=topic.topic_id,
                                              error_code=E.THROTTLING_QUOTA_EXCEEDED,
                                              error_message=QUOTA_EXCEEDED))
            continue
        node.cluster.delete_topic(name)
        out.append(R.DeletableTopicResult(name=name, topic_id=topic.topic_id, error_code=0))
    return R(responses=out)


@api(CreatePartitionsRequest, 0, 3)
def create_partitions(node: Node, req: Incoming[CreatePartitionsRequest]
                     ) -> Answer[CreatePartitionsResponse]:
    R = CreatePartitionsResponse
    state = node.cluster.state
    alterable = allowed_names(node, req, Op.ALTER, RT.TOPIC, (t.name for t in req.body.topics))
    new = 0
    for t in req.body.topics:
        topic = state.topics.get(t.name)
        new += max(0, t.count - (len(topic.partitions) if topic is not None else 0))
    if new > MAX_RECORDS_PER_REQUEST:
        return R(results=[R.CreatePartitionsTopicResult(name=t.name, error_code=E.POLICY_VIOLATION,
                                                        error_message=TOO_LARGE)
                          for t in req.body.topics])
    mutations = _Mutations(node, req, 3)
    out = []
    for t in req.body.topics:
        topic = state.topics.get(t.name)
        code, msg = 0, None
        if t.name not in alterable:
            code, msg = E.TOPIC_AUTHORIZATION_FAILED, "ALTER on the topic needed"
        elif topic is None:
            code, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {t.name!r}"
        elif t.count <= len(topic.partitions):
            code, msg = E.INVALID_PARTITIONS, (f"topic {t.name!r} has {len(topic.partitions)} "
                                               f"partitions; {t.count} would not add any")
        elif not req.body.validate_only:
            if not mutations.admit(t.count - len(topic.partitions)):
                out.append(R.CreatePartitionsTopicResult(
                    name=t.name, error_code=E.THROTTLING_QUOTA_EXCEEDED,
                    error_message=QUOTA_EXCEEDED))
                continue
            try:     # all new partitions or none; refused past the descriptor budget
                state.add_partitions(t.name, t.count)
            except LogError as exc:
                code, msg = exc.error_code, str(exc)
            except OSError as exc:
                code, msg = E.KAFKA_STORAGE_ERROR, (f"cannot create the partitions: "
                                                    f"{exc.strerror or exc}")
        out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=msg))
    return R(results=out)
