"""Admin: topics, cluster metadata, groups, offsets, lag, ACLs and transactions (``AsyncAdmin`` and
``Admin``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kcodec.client import config_admin, quota_admin, scram_admin, txn_admin
from kcodec.client.config import AdminConfig
from kcodec.client.config_admin import AlterConfigOp, ConfigEntry, ConfigResource
from kcodec.client.consumer.assignors import Assignment
from kcodec.client.consumer.list_offsets import EARLIEST, LATEST, list_offsets
from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import KafkaError
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.net.loop import GRACE, LoopThread, shared_loop
from kcodec.client.offset_reset import OffsetReset, plan_reset, reset_target
from kcodec.client.producer.transactions import PreparedTxnState
from kcodec.client.scram_admin import ScramDeletion, ScramUpsertion
from kcodec.client.structs import TopicPartition
from kcodec.client.txn_admin import TransactionDescription, TransactionListing
from kcodec.errors import KcodecError, UnsupportedVersionError
from kcodec.protocol import ErrorCode
from kcodec.protocol.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["Admin", "AsyncAdmin", "BrokerInfo", "PartitionInfo", "TopicDescription",
           "ClusterMetadata", "GroupListing", "GroupDescription", "MemberDescription",
           "PartitionLag", "NewTopic", "TransactionListing", "TransactionDescription",
           "ConfigResource", "ConfigEntry", "AlterConfigOp", "ScramUpsertion", "ScramDeletion",
           "OffsetReset"]


@dataclass
class NewTopic:
    """A topic for ``create_topics``: its name, partitions and replication factor (-1: the
    broker's default) and topic configs."""
    name: str
    num_partitions: int = -1           # -1: the broker's default
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicDescription:
    name: str
    partitions: list[PartitionInfo]
    is_internal: bool = False


@dataclass
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]
    topics: list[TopicDescription]


@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    type: str = ""                       # "classic", "consumer" ...: ListGroups v5+ only


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: dict[str, list[int]]
    group_instance_id: str | None = None
    member_epoch: int | None = None      # consumer-protocol groups (KIP-848) only


@dataclass
class GroupDescription:
    """A group as DescribeGroups (a classic group: ``protocol`` is the assignor its members
    agreed on) or ConsumerGroupDescribe (``type`` "consumer", KIP-848: ``protocol`` is the
    server-side assignor, ``epoch`` the group epoch) describes it."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    type: str = "classic"
    epoch: int | None = None


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end_offset: int

    @property
    def lag(self) -> int:
        return max(self.end_offset - (self.committed or 0), 0) if self.end_offset >= 0 else 0


OffsetSpec = str | int   # "earliest", "latest" or a timestamp in ms


class AsyncAdmin:
    """The asyncio admin client."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = AdminConfig.from_kwargs(config, **kwargs)
        self.cluster = Cluster(self.config)

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the admin client's connections."""
        await self.cluster.close()

    def metrics(self) -> dict[str, dict[str, Any]]:
        """This client's metrics (kcodec.client.metrics)."""
        from kcodec.client.metrics import metrics_of

        return metrics_of(self)

    async def _controller(self) -> int | None:
        if self.cluster.controller_id < 0 or self.cluster.stale:
            await self.cluster.refresh([])
        c = self.cluster.controller_id
        return c if c >= 0 and c in self.cluster.brokers else None

    # ------------------------------------------------------------------ topics
    async def create_topics(self, topics: Iterable[str | NewTopic], num_partitions: int = -1,
                            replication_factor: int = -1, timeout_ms: int = 30000,
                            validate_only: bool = False) -> dict[str, KafkaError | None]:
        """Create topics; the error (or None) per topic. Names alone take the given counts."""
        specs = [t if isinstance(t, NewTopic) else NewTopic(t, num_partitions, replication_factor)
                 for t in topics]
        req = requests.create_topics(
            [(t.name, t.num_partitions, t.replication_factor, t.configs) for t in specs],
            timeout_ms, validate_only)

        async def go() -> Any:
            return await self.cluster.request(await self._controller(), req)
        body = await self.cluster.call(go, "CreateTopics")
        self.cluster.invalidate()
        return {t.name: (KafkaError(t.error_code, f"create topic {t.name!r}", t.error_message)
                         if t.error_code else None) for t in body.topics}

    async def delete_topics(self, names: Iterable[str], timeout_ms: int = 30000) -> dict[str, KafkaError | None]:
        """Delete topics; the error (or None) per topic."""
        req = requests.delete_topics(names, timeout_ms)

        async def go() -> Any:
            return await self.cluster.request(await self._controller(), req)
        body = await self.cluster.call(go, "DeleteTopics")
        self.cluster.invalidate()
        return {r.name: (KafkaError(r.error_code, f"delete topic {r.name!r}", r.error_message)
                         if r.error_code else None) for r in body.responses}

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        """The names of the cluster's topics (internal ones with ``include_internal``)."""
        md = await self.describe_cluster()
        return sorted(t.name for t in md.topics if include_internal or not t.is_internal)

    async def describe_cluster(self, topics: list[str] | None = None,
                               allow_auto_create: bool = False) -> ClusterMetadata:
        """Brokers, controller and topics (partitions, leaders, replicas, ISR); with
        ``allow_auto_create`` a broker that creates topics on first use creates ``topics``."""
        body = await self.cluster.refresh(topics, auto_create=allow_auto_create)
        tds = []
        for t in body.topics:
            if t.error_code:
                if topics is not None:
                    raise KafkaError(t.error_code, f"topic {t.name!r}")
                continue
            parts = [PartitionInfo(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                     for p in sorted(t.partitions, key=lambda p: p.partition_index)]
            tds.append(TopicDescription(t.name, parts, t.is_internal))
        brokers = [BrokerInfo(b.node_id, b.host, b.port, b.rack)
                   for b in sorted(body.brokers, key=lambda b: b.node_id)]
        return ClusterMetadata(body.cluster_id, body.controller_id, brokers,
                               sorted(tds, key=lambda t: t.name))

    # ------------------------------------------------------------------ groups
    async def list_groups(self) -> list[GroupListing]:
        """Every group the brokers know, with its type, state and protocol type."""
        await self.cluster.refresh([])
        out = []
        for node in list(self.cluster.brokers):
            async def go(node: int = node) -> Any:
                return await self.cluster.request(node, requests.list_groups())
            body = await self.cluster.call(go, "ListGroups")
            if body.error_code:
                raise KafkaError(body.error_code, "ListGroups")
            out += [GroupListing(g.group_id, g.protocol_type, g.group_state or "", g.group_type or "") for g in body.groups]
        return sorted(out, key=lambda g: g.group_id)

    async def _coordinator(self, group_id: str) -> int:
        return await Coordinator(self.cluster, group_id, own_connection=False).find()

    async def _consumer_group(self, node: int, gid: str) -> GroupDescription | None:
        """``gid`` described by ConsumerGroupDescribe; None when it is not a consumer-protocol
        group or the broker has no such API (then DescribeGroups describes it)."""
        async def go() -> Any:
            return await self.cluster.request(node, requests.consumer_group_describe([gid]))
        try:
            body = await self.cluster.call(go, "ConsumerGroupDescribe")
        except UnsupportedVersionError:
            return None
        (g,) = body.groups
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND or not g.error_code and g.group_epoch < 0:
            return None   # a classic group (Tansu answers one without error, at epoch -1)
        if g.error_code:
            raise KafkaError(g.error_code, f"describe group {gid!r}", g.error_message)
        members = [MemberDescription(
            m.member_id, m.client_id, m.client_host,
            {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions},
            m.instance_id, m.member_epoch) for m in g.members]
        return GroupDescription(g.group_id, g.group_state, "consumer", g.assignor_name,
                                sorted(members, key=lambda m: m.member_id), "consumer",
                                g.group_epoch)

    async def _share_group(self, node: int, gid: str) -> GroupDescription | None:
        """``gid`` described by ShareGroupDescribe (KIP-932); None when it is not a share
        group or the broker has no such API."""
        from kcodec.protocol import ShareGroupDescribeRequest

        async def go() -> Any:
            return await self.cluster.request(node, ShareGroupDescribeRequest(group_ids=[gid]))
        try:
            body = await self.cluster.call(go, "ShareGroupDescribe")
        except UnsupportedVersionError:
            return None
        (g,) = body.groups
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if g.error_code:
            raise KafkaError(g.error_code, f"describe share group {gid!r}", g.error_message)
        members = [MemberDescription(
            m.member_id, m.client_id, m.client_host,
            {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions},
            None, m.member_epoch) for m in g.members]
        return GroupDescription(g.group_id, g.group_state, "share", g.assignor_name,
                                sorted(members, key=lambda m: m.member_id), "share", g.group_epoch)

    async def describe_share_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Share groups (KIP-932): state, epoch, members and the partitions each reads
        (several members may read one partition). A group that is not a share group
        raises KafkaError GROUP_ID_NOT_FOUND."""
        out = []
        for gid in group_ids:
            g = await self._share_group(await self._coordinator(gid), gid)
            if g is None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"describe share group {gid!r}",
                                 "no share group of that id")
            out.append(g)
        return out

    async def list_share_group_offsets(self, group_id: str,
                                       partitions: Iterable[TopicPartition] | None = None
                                       ) -> dict[TopicPartition, int | None]:
        """The share group's start offset on each partition (every partition it has one
        on, or ``partitions``): records before it are done for the group; None where the
        group has not started on a partition yet."""
        from kcodec.protocol import DescribeShareGroupOffsetsRequest as R

        topics = None
        if partitions is not None:
            by: dict[str, list[int]] = {}
            for t, p in partitions:
                by.setdefault(t, []).append(p)
            topics = [R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=sorted(ps))
                      for t, ps in sorted(by.items())]
        req = R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics)])
        node = await self._coordinator(group_id)

        async def go() -> Any:
            return await self.cluster.request(node, req)
        body = await self.cluster.call(go, "DescribeShareGroupOffsets")
        (g,) = body.groups
        if g.error_code:
            raise KafkaError(g.error_code, f"share-group offsets of {group_id!r}", g.error_message)
        out: dict[TopicPartition, int | None] = {}
        for t in g.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(p.error_code, f"share-group offsets of {group_id!r} on "
                                     f"{t.topic_name}-{p.partition_index}", p.error_message)
                out[TopicPartition(t.topic_name, p.partition_index)] = \
                    p.start_offset if p.start_offset >= 0 else None
        return out

    async def alter_share_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]
                                        ) -> dict[TopicPartition, KafkaError | None]:
        """Set the share group's start offsets (the group must have no members)."""
        from kcodec.protocol import AlterShareGroupOffsetsRequest as R

        by: dict[str, list] = {}
        for (t, p), off in offsets.items():
            by.setdefault(t, []).append(R.AlterShareGroupOffsetsRequestPartition(
                partition_index=p, start_offset=off))
        req = R(group_id=group_id, topics=[R.AlterShareGroupOffsetsRequestTopic(
            topic_name=t, partitions=ps) for t, ps in sorted(by.items())])
        node = await self._coordinator(group_id)

        async def go() -> Any:
            return await self.cluster.request(node, req)
        body = await self.cluster.call(go, "AlterShareGroupOffsets")
        return {TopicPartition(t.topic_name, p.partition_index):
                KafkaError(p.error_code, f"alter share-group offset of {group_id!r}",
                           p.error_message) if p.error_code else None
                for t in body.responses for p in t.partitions}

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                         ) -> dict[str, KafkaError | None]:
        """Forget the share group's state on ``topics`` (the group must have no members):
        it starts again from ``share.auto.offset.reset`` there."""
        from kcodec.protocol import DeleteShareGroupOffsetsRequest as R

        req = R(group_id=group_id, topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                           for t in topics])
        node = await self._coordinator(group_id)

        async def go() -> Any:
            return await self.cluster.request(node, req)
        body = await self.cluster.call(go, "DeleteShareGroupOffsets")
        if body.error_code:
            raise KafkaError(body.error_code, f"delete share-group offsets of {group_id!r}",
                             body.error_message)
        out: dict[str, KafkaError | None] = {}
        for t in body.responses:
            codes = [p.error_code for p in t.partitions if p.error_code]
            out[t.topic_name] = KafkaError(codes[0], f"delete share-group offsets of "
                                           f"{group_id!r} on {t.topic_name}") if codes else None
        return out

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """State, protocol and members (client id, host, assigned partitions) of each group.

        As Kafka 4's admin client: ConsumerGroupDescribe first, which describes groups of
        the consumer protocol (KIP-848) with all their members, classic ones included; then
        ShareGroupDescribe (a share group, KIP-932: type "share"); for a classic group
        (GROUP_ID_NOT_FOUND in both) or a broker without those APIs, DescribeGroups."""
        out = []
        for gid in group_ids:
            node = await self._coordinator(gid)
            cg = await self._consumer_group(node, gid)
            if cg is None:
                cg = await self._share_group(node, gid)
            if cg is not None:
                out.append(cg)
                continue

            async def go(node: int = node, gid: str = gid) -> Any:
                return await self.cluster.request(node, requests.describe_groups([gid]))
            body = await self.cluster.call(go, "DescribeGroups")
            for g in body.groups:
                if g.error_code:
                    raise KafkaError(g.error_code, f"describe group {g.group_id!r}", g.error_message)
                members = []
                for m in g.members:
                    try:
                        a = Assignment.decode(m.member_assignment).assigned_partitions \
                            if g.protocol_type == "consumer" and m.member_assignment else {}
                    except KcodecError:
                        a = {}
                    members.append(MemberDescription(m.member_id, m.client_id, m.client_host,
                                                     {t: sorted(p) for t, p in a.items()},
                                                     m.group_instance_id))
                out.append(GroupDescription(g.group_id, g.group_state, g.protocol_type,
                                            g.protocol_data, sorted(members, key=lambda m: m.member_id)))
        return out

    # ------------------------------------------------------------------ offsets
    async def list_offsets(self, partitions: Iterable[TopicPartition],
                           spec: OffsetSpec = "latest") -> dict[TopicPartition, int]:
        """Offsets by ``spec``: "earliest", "latest" (the end offset) or a timestamp (ms)."""
        ts = {"earliest": EARLIEST, "latest": LATEST}.get(spec, spec) if isinstance(spec, str) else spec
        if not isinstance(ts, int):
            raise ValueError(f"offset spec must be 'earliest', 'latest' or a timestamp, got {spec!r}")
        return await list_offsets(self.cluster, [TopicPartition(*tp) for tp in partitions], ts)

    async def committed_offsets(self, group_id: str, topics: list[str] | None = None
                                ) -> dict[TopicPartition, int]:
        """The group's committed offsets (every partition it has, or those of ``topics``)."""
        body = await self._offset_fetch(group_id, topics, False)
        out = {}
        for t in body.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
        return out

    async def unstable_offsets(self, group_id: str, topics: list[str] | None = None
                               ) -> set[TopicPartition]:
        """The group's partitions (of ``topics``, default all) whose offsets wait in a
        transaction still open: OffsetFetch with require_stable (KIP-447) answers them
        UNSTABLE_OFFSET_COMMIT."""
        body = await self._offset_fetch(group_id, topics, True)
        return {TopicPartition(t.name, p.partition_index) for t in body.topics
                for p in t.partitions if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT}

    async def _offset_fetch(self, group_id: str, topics: list[str] | None, stable: bool
                            ) -> Any:
        node = await self._coordinator(group_id)
        if topics is None:   # every topic, named: some brokers answer a null request with null
            body = await self.cluster.refresh(None)
            topics = sorted(t.name for t in body.topics
                            if t.error_code == ErrorCode.NONE and not t.is_internal)
        wanted = {}
        for t in topics:
            info = await self.cluster.topic(t, auto_create=False)
            wanted[t] = sorted(info.partitions)
        req = requests.offset_fetch(group_id, wanted, require_stable=stable)

        async def go() -> Any:
            return await self.cluster.request(node, req)
        body = await self.cluster.call(go, "OffsetFetch")
        if body.error_code:
            raise KafkaError(body.error_code, f"committed offsets of {group_id!r}")
        return body

    async def alter_consumer_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]
                                           ) -> dict[TopicPartition, KafkaError | None]:
        """Set the group's committed offsets (each the next offset to read), committed as a
        non-member, as Java's ``alterConsumerGroupOffsets`` and ``kafka-consumer-groups
        --reset-offsets`` do: the broker refuses partitions the group's live members read.
        The error (or None) per partition."""
        from kcodec.client.consumer.commits import Commits

        commits = Commits(Coordinator(self.cluster, group_id))
        codes = await commits.commit_each({TopicPartition(*tp): off for tp, off in offsets.items()})
        return {tp: KafkaError(code, f"alter offset of {group_id!r} {tp.topic}[{tp.partition}]")
                if code else None for tp, code in codes.items()}

    async def reset_consumer_group_offsets(
            self, group_id: str, topics: dict[str, list[int] | None] | None = None, *,
            to_earliest: bool = False, to_latest: bool = False, to_offset: int | None = None,
            to_datetime: int | None = None, shift_by: int | None = None,
            execute: bool = False) -> list[OffsetReset]:
        """Kafka's ``kafka-consumer-groups --reset-offsets`` (kcodec.client.offset_reset):
        the new offset of each partition of ``topics`` (name -> partitions, None: all; no
        ``topics``: those the group has committed offsets for) for the one target given;
        committed only with ``execute`` (each row's ``error`` then says how that went).
        The group must have no members."""
        kind, value = reset_target(to_earliest, to_latest, to_offset, to_datetime, shift_by)
        plan = await plan_reset(self, group_id, topics, kind, value)
        if execute and plan:
            errors = await self.alter_consumer_group_offsets(
                group_id, {TopicPartition(r.topic, r.partition): r.new for r in plan})
            for r in plan:
                r.error = errors.get(TopicPartition(r.topic, r.partition))
        return plan

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        """Delete groups (DeleteGroups, to each group's coordinator) with their committed
        offsets; a group with members is refused (NON_EMPTY_GROUP), an unknown one is
        GROUP_ID_NOT_FOUND. The error (or None) per group."""
        from kcodec.protocol import DeleteGroupsRequest

        out: dict[str, KafkaError | None] = {}
        for gid in group_ids:
            node = await self._coordinator(gid)

            async def go(node: int = node, gid: str = gid) -> Any:
                return await self.cluster.request(node, DeleteGroupsRequest(groups_names=[gid]))
            body = await self.cluster.call(go, "DeleteGroups")
            for r in body.results:
                out[r.group_id] = (KafkaError(r.error_code, f"delete group {r.group_id!r}")
                                   if r.error_code else None)
        return out

    async def describe_topics(self, topics: Iterable[str]) -> list[TopicDescription]:
        """Each topic's partitions with leader, replicas and ISR; an unknown topic raises
        KafkaError (UNKNOWN_TOPIC_OR_PARTITION)."""
        return (await self.describe_cluster(list(topics))).topics

    async def lag(self, group_id: str, topics: list[str] | None = None) -> list[PartitionLag]:
        """Committed offset, end offset and lag per partition of the group's topics."""
        committed = await self.committed_offsets(group_id, topics)
        names = sorted(set(topics or []) | {tp.topic for tp in committed})
        tps = []
        for t in names:
            info = await self.cluster.topic(t, auto_create=False)
            tps += [TopicPartition(t, p) for p in sorted(info.partitions)]
        ends = await list_offsets(self.cluster, tps, LATEST) if tps else {}
        return [PartitionLag(tp.topic, tp.partition, committed.get(tp), ends.get(tp, -1)) for tp in tps]

    async def remove_members(self, group_id: str, members: dict[str, str],
                             reason: str = "removed by the admin client"
                             ) -> dict[str, KafkaError | None]:
        """Take members out of the group at once, as if each had left: ``members`` maps a
        member id to its group's protocol, ``"classic"`` (LeaveGroup naming it, as Java's
        ``removeMembersFromConsumerGroup``) or ``"consumer"`` (a ConsumerGroupHeartbeat at
        epoch -1 on its behalf, KIP-848's leave). Its partitions move without waiting for its
        session to time out. The error (or None) per member; an unknown member is
        UNKNOWN_MEMBER_ID."""
        coord = Coordinator(self.cluster, group_id, own_connection=False)
        out: dict[str, KafkaError | None] = {}
        classic = [m for m, proto in members.items() if proto == "classic"]
        for m, proto in members.items():
            if proto not in ("classic", "consumer"):
                raise ValueError(f"member {m!r}: the group protocol is classic or consumer, "
                                 f"not {proto!r}")
        for m in classic:
            body = await coord.call(requests.leave_group(group_id, m, None, reason), "LeaveGroup")
            code = body.error_code or next((r.error_code for r in body.members
                                            if r.member_id == m and r.error_code), 0)
            out[m] = KafkaError(code, f"remove {m!r} from {group_id!r}") if code else None
        for m, proto in members.items():
            if proto != "consumer":
                continue
            hb = requests.consumer_group_heartbeat(group_id, m, -1, None, -1, None, None, None)
            got = await coord.call(hb, "ConsumerGroupHeartbeat")
            out[m] = KafkaError(got.error_code, f"remove {m!r} from {group_id!r}",
                                got.error_message) if got.error_code else None
        return out

    # ------------------------------------------------------------------ configs
    async def describe_configs(self, resources: Iterable[Any], keys: Iterable[str] | None = None,
                               include_synonyms: bool = True,
                               include_documentation: bool = False
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Each resource's configs by name (``ConfigResource("topic", "t")`` or a
        ``("broker", "0")`` tuple): value, source, synonyms, type, documentation."""
        return await config_admin.describe_configs(self.cluster, resources, keys,
                                                   include_synonyms, include_documentation)

    async def alter_configs(self, configs: dict[Any, dict[str, str]], validate_only: bool = False
                            ) -> dict[ConfigResource, KafkaError | None]:
        """Replace each resource's overrides (AlterConfigs); the error (or None) per
        resource."""
        return await config_admin.alter_configs(self.cluster, configs, validate_only)

    async def incremental_alter_configs(self, changes: dict[Any, Iterable[AlterConfigOp]],
                                        validate_only: bool = False
                                        ) -> dict[ConfigResource, KafkaError | None]:
        """Set, delete, append to or subtract from configs (IncrementalAlterConfigs); the
        error (or None) per resource."""
        return await config_admin.incremental_alter_configs(self.cluster, changes,
                                                            validate_only)

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, list[tuple[str, int]]]:
        """SCRAM users (all, or the named ones): user -> [(mechanism, iterations)]."""
        return await scram_admin.describe_user_scram_credentials(
            self.cluster, None if users is None else list(users))

    async def alter_user_scram_credentials(self, changes: Iterable[ScramUpsertion | ScramDeletion]
                                           ) -> dict[str, KafkaError | None]:
        """Upsert (the password salted here, never sent) and delete SCRAM credentials; the
        error (or None) per user."""
        return await scram_admin.alter_user_scram_credentials(self.cluster, list(changes))

    async def describe_client_quotas(self, components: Iterable[tuple[str, str, str | None]] = (),
                                     strict: bool = False) -> dict[Any, dict[str, float]]:
        """Client quotas of the entities matching (entity type, ``exact``/``default``/
        ``any``, name) components: entity -> {key: value}; an entity is sorted ((type,
        name or None), ...)."""
        return await quota_admin.describe_client_quotas(self.cluster, list(components), strict)

    async def alter_client_quotas(self, changes: dict[Any, dict[str, float | None]],
                                  validate_only: bool = False) -> dict[Any, KafkaError | None]:
        """Set (a value) or remove (None) client quota keys per entity (``{"user":
        "alice"}`` or an entity key); the error (or None) per entity."""
        return await quota_admin.alter_client_quotas(self.cluster, changes, validate_only)

    # ------------------------------------------------------------------ ACLs
    async def create_acls(self, acls: Iterable[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Create ACLs (CreateAcls); the error (or None) per ACL. An ACL that cannot be
        valid (``AclBinding.problem``) is a ``ValueError`` before anything is sent."""
        acls = list(acls)
        for a in acls:
            why = a.problem()
            if why is not None:
                raise ValueError(f"cannot create ACL {a}: {why}")
        if not acls:
            return {}
        req = requests.create_acls(acls)

        async def go() -> Any:
            return await self.cluster.request(None, req)
        body = await self.cluster.call(go, "CreateAcls")
        return {a: (KafkaError(r.error_code, f"create ACL {a}", r.error_message)
                    if r.error_code else None) for a, r in zip(acls, body.results, strict=False)}

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (default: all); ``KafkaError`` if the broker
        refuses (SECURITY_DISABLED: it has no authorizer; CLUSTER_AUTHORIZATION_FAILED)."""
        f = _checked(acl_filter or AclBindingFilter())
        req = requests.describe_acls(f)

        async def go() -> Any:
            return await self.cluster.request(None, req)
        body = await self.cluster.call(go, "DescribeAcls")
        if body.error_code:
            raise KafkaError(body.error_code, "describe ACLs", body.error_message)
        return [_binding(r.resource_type, r.resource_name, r.pattern_type, a)
                for r in body.resources for a in r.acls]

    async def delete_acls(self, filters: Iterable[AclBindingFilter]
                          ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs each filter matches (DeleteAcls); the deleted ACLs per filter.
        ``KafkaError`` if the broker refuses a filter or an ACL."""
        filters = [_checked(f) for f in filters]
        if not filters:
            return {}
        req = requests.delete_acls(filters)

        async def go() -> Any:
            return await self.cluster.request(None, req)
        body = await self.cluster.call(go, "DeleteAcls")
        out: dict[AclBindingFilter, list[AclBinding]] = {}
        for f, r in zip(filters, body.filter_results, strict=False):
            if r.error_code:
                raise KafkaError(r.error_code, "delete ACLs", r.error_message)
            deleted = []
            for m in r.matching_acls:
                acl = _binding(m.resource_type, m.resource_name, m.pattern_type, m)
                if m.error_code:
                    raise KafkaError(m.error_code, f"delete ACL {acl}", m.error_message)
                deleted.append(acl)
            out.setdefault(f, []).extend(deleted)
        return out

    # ------------------------------------------------------------------ transactions
    async def list_transactions(self, states: Iterable[str] = (),
                                producer_ids: Iterable[int] = (), min_duration_ms: int = -1,
                                pattern: str | None = None) -> list[TransactionListing]:
        """Every transactional id the brokers coordinate (ListTransactions), filtered by
        state names, producer ids, how long the transaction has run and a regular
        expression on the id."""
        return await txn_admin.list_transactions(self.cluster, states, producer_ids,
                                                 min_duration_ms, pattern)

    async def describe_transactions(self, transactional_ids: Iterable[str]
                                    ) -> list[TransactionDescription]:
        """Each transactional id as its coordinator describes it (DescribeTransactions)."""
        return await txn_admin.describe_transactions(self.cluster, transactional_ids)

    async def force_terminate_transaction(self, transactional_id: str) -> None:
        """Abort the transaction open or prepared under ``transactional_id`` and fence its
        producer (KIP-939's forceTerminateTransaction)."""
        await txn_admin.force_terminate(self.cluster, transactional_id)

    async def complete_prepared_transaction(self, transactional_id: str,
                                            prepared: PreparedTxnState | str,
                                            commit: bool = True) -> bool:
        """Commit the transaction left prepared under ``transactional_id`` if ``prepared``
        (its state recorded at prepare time) matches, else abort it; True if committed."""
        return await txn_admin.complete_prepared(self.cluster, transactional_id, prepared,
                                                 commit)


def _checked(f: AclBindingFilter) -> AclBindingFilter:
    why = f.problem()
    if why is not None:
        raise ValueError(f"bad ACL filter: {why}")
    return f


def _binding(resource_type: int, name: str, pattern_type: int, a: Any) -> AclBinding:
    return AclBinding(ResourceType.of(resource_type), name, PatternType.of(pattern_type),
                      a.principal, a.host, AclOperation.of(a.operation),
                      AclPermissionType.of(a.permission_type))


class Admin:
    """The blocking admin client; the same methods as ``AsyncAdmin``, returning results."""

    def __init__(self, config: dict[str, Any] | None = None, *,
                 loop: LoopThread | None = None, **kwargs: Any) -> None:
        self._loop = loop or shared_loop()
        self._async = AsyncAdmin(config, **kwargs)
        self.config = self._async.config
        self._timeout = self.config.api_timeout_ms / 1000 + GRACE

    def _run(self, coro: Any) -> Any:
        return self._loop.run(coro, self._timeout)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """This client's metrics (kcodec.client.metrics)."""
        return self._async.metrics()

    def create_topics(self, topics: Iterable[str | NewTopic], num_partitions: int = -1,
                      replication_factor: int = -1, timeout_ms: int = 30000,
                      validate_only: bool = False) -> dict[str, KafkaError | None]:
        """Create topics (names or ``NewTopic``); returns each name's error, or None where it
        was created."""
        return self._run(self._async.create_topics(list(topics), num_partitions, replication_factor,
                                                   timeout_ms, validate_only))

    def delete_topics(self, names: Iterable[str], timeout_ms: int = 30000) -> dict[str, KafkaError | None]:
        """Delete topics; returns each name's error, or None where it was deleted."""
        return self._run(self._async.delete_topics(list(names), timeout_ms))

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """The names of the cluster's topics (internal ones with ``include_internal``)."""
        return self._run(self._async.list_topics(include_internal))

    def describe_cluster(self, topics: list[str] | None = None,
                         allow_auto_create: bool = False) -> ClusterMetadata:
        """Brokers, controller and topics with their partitions, leaders, replicas and ISR."""
        return self._run(self._async.describe_cluster(topics, allow_auto_create))

    def list_groups(self) -> list[GroupListing]:
        """Every group the brokers know, with its type, state and protocol type."""
        return self._run(self._async.list_groups())

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Each group's state, protocol and members with their assigned partitions."""
        return self._run(self._async.describe_groups(list(group_ids)))

    def list_offsets(self, partitions: Iterable[TopicPartition], spec: OffsetSpec = "latest"
                     ) -> dict[TopicPartition, int]:
        """Each partition's offset for ``spec``: ``"earliest"``, ``"latest"`` or a timestamp in
        ms."""
        return self._run(self._async.list_offsets(list(partitions), spec))

    def committed_offsets(self, group_id: str, topics: list[str] | None = None) -> dict[TopicPartition, int]:
        """The group's committed offsets (of ``topics``, default all)."""
        return self._run(self._async.committed_offsets(group_id, topics))

    def unstable_offsets(self, group_id: str, topics: list[str] | None = None
                         ) -> set[TopicPartition]:
        """The group's partitions whose offsets wait in a transaction still open (see
        ``AsyncAdmin``)."""
        return self._run(self._async.unstable_offsets(group_id, topics))

    def alter_consumer_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]
                                     ) -> dict[TopicPartition, KafkaError | None]:
        """Set the group's committed offsets as a non-member (Java's
        ``alterConsumerGroupOffsets``); the error (or None) per partition."""
        return self._run(self._async.alter_consumer_group_offsets(group_id, dict(offsets)))

    def reset_consumer_group_offsets(
            self, group_id: str, topics: dict[str, list[int] | None] | None = None, *,
            to_earliest: bool = False, to_latest: bool = False, to_offset: int | None = None,
            to_datetime: int | None = None, shift_by: int | None = None,
            execute: bool = False) -> list[OffsetReset]:
        """Kafka's ``kafka-consumer-groups --reset-offsets``: the new offset per partition
        for the one target given, committed only with ``execute`` (see ``AsyncAdmin``)."""
        return self._run(self._async.reset_consumer_group_offsets(
            group_id, None if topics is None else dict(topics), to_earliest=to_earliest,
            to_latest=to_latest, to_offset=to_offset, to_datetime=to_datetime,
            shift_by=shift_by, execute=execute))

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        """Delete groups with their committed offsets; the error (or None) per group."""
        return self._run(self._async.delete_groups(list(group_ids)))

    def describe_topics(self, topics: Iterable[str]) -> list[TopicDescription]:
        """Each topic's partitions with leader, replicas and ISR."""
        return self._run(self._async.describe_topics(list(topics)))

    def lag(self, group_id: str, topics: list[str] | None = None) -> list[PartitionLag]:
        """Committed offset, end offset and lag of each of the group's partitions."""
        return self._run(self._async.lag(group_id, topics))

    def remove_members(self, group_id: str, members: dict[str, str],
                       reason: str = "removed by the admin client"
                       ) -> dict[str, KafkaError | None]:
        """Take members (member id -> ``"classic"`` or ``"consumer"``, their group's
        protocol) out of the group at once, as if each had left; the error (or None) per
        member."""
        return self._run(self._async.remove_members(group_id, dict(members), reason))

    def describe_share_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Share groups (KIP-932): state, epoch, members and the partitions each reads."""
        return self._run(self._async.describe_share_groups(list(group_ids)))

    def list_share_group_offsets(self, group_id: str,
                                 partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, int | None]:
        """The share group's start offset per partition (None where it has not started)."""
        return self._run(self._async.list_share_group_offsets(
            group_id, None if partitions is None else list(partitions)))

    def alter_share_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]
                                  ) -> dict[TopicPartition, KafkaError | None]:
        """Set the share group's start offsets (it must have no members); the error (or
        None) per partition."""
        return self._run(self._async.alter_share_group_offsets(group_id, dict(offsets)))

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                   ) -> dict[str, KafkaError | None]:
        """Forget the share group's state on ``topics`` (it must have no members); the
        error (or None) per topic."""
        return self._run(self._async.delete_share_group_offsets(group_id, list(topics)))
    def describe_configs(self, resources: Iterable[Any], keys: Iterable[str] | None = None,
                         include_synonyms: bool = True, include_documentation: bool = False
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Each resource's configs by name (see ``AsyncAdmin.describe_configs``)."""
        return self._run(self._async.describe_configs(
            list(resources), None if keys is None else list(keys), include_synonyms,
            include_documentation))

    def alter_configs(self, configs: dict[Any, dict[str, str]], validate_only: bool = False
                      ) -> dict[ConfigResource, KafkaError | None]:
        """Replace each resource's overrides; the error (or None) per resource."""
        return self._run(self._async.alter_configs(dict(configs), validate_only))

    def incremental_alter_configs(self, changes: dict[Any, Iterable[AlterConfigOp]],
                                  validate_only: bool = False
                                  ) -> dict[ConfigResource, KafkaError | None]:
        """Set, delete, append to or subtract from configs; the error (or None) per
        resource."""
        return self._run(self._async.incremental_alter_configs(
            {r: list(ops) for r, ops in changes.items()}, validate_only))

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                        ) -> dict[str, list[tuple[str, int]]]:
        """SCRAM users (all, or the named ones): user -> [(mechanism, iterations)]."""
        return self._run(self._async.describe_user_scram_credentials(
            None if users is None else list(users)))

    def alter_user_scram_credentials(self, changes: Iterable[ScramUpsertion | ScramDeletion]
                                     ) -> dict[str, KafkaError | None]:
        """Upsert and delete SCRAM credentials; the error (or None) per user."""
        return self._run(self._async.alter_user_scram_credentials(list(changes)))

    def describe_client_quotas(self, components: Iterable[tuple[str, str, str | None]] = (),
                               strict: bool = False) -> dict[Any, dict[str, float]]:
        """Client quotas of the matching entities (see ``AsyncAdmin``)."""
        return self._run(self._async.describe_client_quotas(list(components), strict))

    def alter_client_quotas(self, changes: dict[Any, dict[str, float | None]],
                            validate_only: bool = False) -> dict[Any, KafkaError | None]:
        """Set or remove client quota keys per entity; the error (or None) per entity."""
        return self._run(self._async.alter_client_quotas(changes, validate_only))

    def create_acls(self, acls: Iterable[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Create ACLs; the error (or None) per ACL. An ACL that cannot be valid is a
        ``ValueError`` before anything is sent."""
        return self._run(self._async.create_acls(list(acls)))

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (default: all); ``KafkaError`` if the broker
        refuses (SECURITY_DISABLED: it has no authorizer)."""
        return self._run(self._async.describe_acls(acl_filter))

    def delete_acls(self, filters: Iterable[AclBindingFilter]
                    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs each filter matches; the deleted ACLs per filter."""
        return self._run(self._async.delete_acls(list(filters)))

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1, pattern: str | None = None
                          ) -> list[TransactionListing]:
        """Every transactional id the brokers coordinate, filtered (see ``AsyncAdmin``)."""
        return self._run(self._async.list_transactions(list(states), list(producer_ids),
                                                       min_duration_ms, pattern))

    def describe_transactions(self, transactional_ids: Iterable[str]
                              ) -> list[TransactionDescription]:
        """Each transactional id as its coordinator describes it."""
        return self._run(self._async.describe_transactions(list(transactional_ids)))

    def force_terminate_transaction(self, transactional_id: str) -> None:
        """Abort the transaction open or prepared under ``transactional_id``; fence its
        producer."""
        self._run(self._async.force_terminate_transaction(transactional_id))

    def complete_prepared_transaction(self, transactional_id: str,
                                      prepared: PreparedTxnState | str,
                                      commit: bool = True) -> bool:
        """Commit the prepared transaction if ``prepared`` matches, else abort it; True if
        committed."""
        return self._run(self._async.complete_prepared_transaction(
            transactional_id, prepared, commit))

    def close(self) -> None:
        """Close the admin client's connections."""
        self._run(self._async.close())

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
