"""Replica sets and racks (kcodec/broker/state.py, apis/meta.py, apis/topics.py, the
broker.rack and replica.selector.class configs): what Metadata, DescribeCluster,
DescribeConfigs and CreateTopics say of them, as Kafka's brokers do."""

from __future__ import annotations

import pytest

from kcodec.broker import RACK_AWARE_SELECTOR, Cluster
from kcodec.broker.config import ConfigError
from kcodec.protocol import (
    CreateTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    ErrorCode,
    MetadataRequest,
    ProduceRequest,
)
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw

E = ErrorCode
C, D = CreateTopicsRequest, DescribeConfigsRequest
BROKER = 4
STATIC_BROKER, DEFAULT = 4, 5


def metadata(raw: Raw, topic: str, version: int = 12):
    M = MetadataRequest
    return raw.call(M(topics=[M.MetadataRequestTopic(name=topic)],
                      allow_auto_topic_creation=False), version)


def create(raw: Raw, name: str, partitions: int = -1, rf: int = -1, assignments=None):
    r = raw.call(C(topics=[C.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[C.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                     for i, b in enumerate(assignments or [])], configs=[])],
        timeout_ms=5000, validate_only=False), 7).topics[0]
    return r


@pytest.fixture(scope="module")
def racked():
    with Cluster(3, config={"broker.rack": "RACK{id}",
                            "replica.selector.class": RACK_AWARE_SELECTOR}) as c:
        yield c


def test_metadata_lists_the_replica_set_leader_first_and_each_nodes_rack(racked):
    with Raw(racked.bootstrap) as raw:
        r = create(raw, "rf3", partitions=3, rf=3)
        assert (r.error_code, r.replication_factor, r.num_partitions) == (0, 3, 3)
        md = metadata(raw, "rf3")
    assert sorted((b.node_id, b.rack) for b in md.brokers) == [
        (0, "RACK0"), (1, "RACK1"), (2, "RACK2")]
    parts = md.topics[0].partitions
    leaders = []
    for p in parts:
        assert sorted(p.replica_nodes) == [0, 1, 2]
        assert p.replica_nodes[0] == p.leader_id          # the preferred leader first
        assert p.isr_nodes == p.replica_nodes and p.offline_replicas == []
        leaders.append(p.leader_id)
    assert sorted(leaders) == [0, 1, 2]                   # round-robin over the nodes
    assert racked.replicas_of("rf3", 0) == parts[0].replica_nodes


def test_describe_cluster_carries_the_racks(racked):
    with Raw(racked.bootstrap) as raw:
        r = raw.call(DescribeClusterRequest(include_cluster_authorized_operations=False), 1)
    assert sorted((b.broker_id, b.rack) for b in r.brokers) == [
        (0, "RACK0"), (1, "RACK1"), (2, "RACK2")]


def test_describe_configs_shows_each_brokers_rack_with_its_source(racked):
    with Raw(racked.bootstrap) as raw:
        for node in range(3):
            r = raw.call(D(resources=[D.DescribeConfigsResource(
                resource_type=BROKER, resource_name=str(node),
                configuration_keys=["broker.rack", "replica.selector.class"])],
                include_synonyms=True), 4).results[0]
            got = {c.name: c for c in r.configs}
            assert r.error_code == 0
            rack = got["broker.rack"]
            assert (rack.value, rack.config_source, rack.read_only) == (
                f"RACK{node}", STATIC_BROKER, True)
            assert [(s.value, s.source) for s in rack.synonyms] == [
                (f"RACK{node}", STATIC_BROKER), (None, DEFAULT)]
            assert got["replica.selector.class"].value == RACK_AWARE_SELECTOR


def test_without_racks_broker_rack_is_null_by_default():
    with Cluster(1) as c, Raw(c.bootstrap) as raw:
        r = raw.call(D(resources=[D.DescribeConfigsResource(
            resource_type=BROKER, resource_name="0",
            configuration_keys=["broker.rack", "replica.selector.class"])]), 4).results[0]
        got = {x.name: (x.value, x.config_source) for x in r.configs}
        assert got == {"broker.rack": (None, DEFAULT), "replica.selector.class": (None, DEFAULT)}
        assert metadata(raw, "none").brokers[0].rack is None


def test_racks_as_a_list_one_per_node():
    with Cluster(3, racks=["a", "a", "b"]) as c, Raw(c.bootstrap) as raw:
        assert sorted((b.node_id, b.rack) for b in metadata(raw, "x").brokers) == [
            (0, "a"), (1, "a"), (2, "b")]
    with pytest.raises(ValueError, match="one rack per node"):
        Cluster(3, racks=["a", "b"])
    with pytest.raises(ValueError, match="either as racks= or as the broker.rack"):
        Cluster(2, racks=["a", "b"], config={"broker.rack": "r"})


def test_an_unknown_replica_selector_class_is_refused():
    with pytest.raises(ConfigError, match="Class com.example.Mine cannot be found"):
        Cluster(1, config={"replica.selector.class": "com.example.Mine"})


def test_a_stopped_node_leaves_the_isr_and_acks_all_counts_it():
    with Cluster(3) as c:
        c.create_topic("t", 1, leaders=[0], replication_factor=3,
                       configs={"min.insync.replicas": "3"})
        assert c.replicas_of("t", 0) == [0, 1, 2]
        b = RecordBatchBuilder()
        b.append(b"k", b"v", [], 0)
        P = ProduceRequest

        def produce(raw: Raw) -> int:
            r = raw.call(P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name="t", partition_data=[P.PartitionProduceData(index=0,
                                                                 records=b.build())])]), 9)
            return r.responses[0].partition_responses[0].error_code

        with Raw(c.nodes[0].address) as raw:
            assert produce(raw) == 0
            c.stop_node(2)
            p = metadata(raw, "t").topics[0].partitions[0]
            assert (p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (
                0, [0, 1, 2], [0, 1], [2])
            assert produce(raw) == E.NOT_ENOUGH_REPLICAS
            c.restart_node(2)
            assert metadata(raw, "t").topics[0].partitions[0].isr_nodes == [0, 1, 2]
            assert produce(raw) == 0


def test_create_topics_with_assignments_keeps_them():
    with Cluster(3) as c, Raw(c.bootstrap) as raw:
        r = create(raw, "manual", assignments=[[2, 0], [1, 2]])
        assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 2, 2)
        parts = metadata(raw, "manual").topics[0].partitions
        assert [(p.leader_id, p.replica_nodes) for p in parts] == [(2, [2, 0]), (1, [1, 2])]
        assert create(raw, "dup", assignments=[[1, 1]]).error_code == E.INVALID_REPLICA_ASSIGNMENT
        assert create(raw, "far", assignments=[[0, 7]]).error_code == E.INVALID_REPLICA_ASSIGNMENT
        assert create(raw, "uneven", assignments=[[0], [0, 1]]).error_code == \
            E.INVALID_REPLICA_ASSIGNMENT
        both = create(raw, "both", partitions=2, assignments=[[0]])
        assert both.error_code == E.INVALID_REQUEST and "numPartitions" in both.error_message
        assert create(raw, "big", rf=4).error_code == E.INVALID_REPLICATION_FACTOR


def test_default_replication_factor_is_honoured_and_capped_at_the_nodes():
    with Cluster(2, config={"default.replication.factor": 3}) as c, Raw(c.bootstrap) as raw:
        assert create(raw, "d").replication_factor == 2
        assert len(metadata(raw, "d").topics[0].partitions[0].replica_nodes) == 2
        M = MetadataRequest
        auto = raw.call(M(topics=[M.MetadataRequestTopic(name="auto")],
                          allow_auto_topic_creation=True), 12).topics[0]
        assert auto.error_code == 0 and len(auto.partitions[0].replica_nodes) == 2


def test_move_leader_outside_the_replica_set_takes_the_old_leaders_place():
    with Cluster(3) as c:
        c.create_topic("m", 1, leaders=[0], replication_factor=2)
        assert c.replicas_of("m", 0) == [0, 1]
        c.move_leader("m", 0, 1)                  # inside: only the leader changes
        assert (c.leader_of("m", 0), c.replicas_of("m", 0)) == (1, [0, 1])
        c.move_leader("m", 0, 2)                  # outside: replaces the old leader
        assert (c.leader_of("m", 0), c.replicas_of("m", 0)) == (2, [0, 2])


def test_replica_sets_survive_a_restart(tmp_path):
    with Cluster(3, data_dir=tmp_path) as c:
        c.create_topic("kept", 2, replication_factor=3)
        before = [c.replicas_of("kept", i) for i in range(2)]
    with Cluster(3, data_dir=tmp_path) as c:
        assert [c.replicas_of("kept", i) for i in range(2)] == before
        assert c.leader_of("kept", 0) == before[0][0]
