"""The Cluster test controls: nodes, leaders, coordinators, hooks, pushed errors, version
caps, recording; and the pytest fixtures."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import DROP, NEVER, Cluster, Delay
from kcodec.protocol import (
    ApiVersionsRequest,
    ErrorCode,
    FindCoordinatorRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw

pytest_plugins = ["kcodec.testing.fixtures"]

E = ErrorCode


def produce_req(topic="t", part=0):
    b = RecordBatchBuilder()
    b.append(None, b"v", [], int(time.time() * 1000))
    P = ProduceRequest
    return P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
        P.PartitionProduceData(index=part, records=b.build())])])


def code_of(r):
    return r.responses[0].partition_responses[0].error_code


def test_fixtures(kafka_broker, kafka_cluster):
    assert len(kafka_broker.bootstrap.split(",")) == 1
    assert len(kafka_cluster.bootstrap.split(",")) == 3


def test_topics_leaders_and_metadata_across_nodes(kafka_cluster):
    c = kafka_cluster
    c.create_topic("t", 3, leaders=[2, 0, 1])
    assert [c.leader_of("t", i) for i in range(3)] == [2, 0, 1]
    addrs = c.bootstrap.split(",")
    with Raw(addrs[0]) as raw:
        # node 0 does not lead partition 0: NOT_LEADER_OR_FOLLOWER, nothing written
        assert code_of(raw.call(produce_req("t", 0), 9)) == E.NOT_LEADER_OR_FOLLOWER
        assert code_of(raw.call(produce_req("t", 1), 9)) == 0
    with Raw(addrs[2]) as raw:
        assert code_of(raw.call(produce_req("t", 0), 9)) == 0
    c.move_leader("t", 0, 1)
    with Raw(addrs[1]) as raw:
        assert code_of(raw.call(produce_req("t", 0), 9)) == 0
        md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), 12)
        p0 = md.topics[0].partitions[0]
        assert (p0.leader_id, p0.leader_epoch) == (1, 1)
    assert c.state.topics["t"].partitions[0].log.log_end_offset == 2


def test_stop_and_restart_node_keeps_port_and_log(kafka_cluster):
    c = kafka_cluster
    c.create_topic("t", 1, leaders=[1])
    port = c.nodes[1].port
    with Raw(f"127.0.0.1:{port}") as raw:
        assert code_of(raw.call(produce_req(), 9)) == 0
    c.stop_node(1)
    with Raw(c.bootstrap) as raw:
        md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), 12)
        assert [b.node_id for b in md.brokers] == [0, 2]
        assert md.topics[0].partitions[0].error_code == E.LEADER_NOT_AVAILABLE
    with pytest.raises(OSError):
        Raw(f"127.0.0.1:{port}", timeout=2).call(ApiVersionsRequest(), 0)
    c.restart_node(1)
    assert c.nodes[1].port == port
    with Raw(f"127.0.0.1:{port}") as raw:
        assert raw.call(produce_req(), 9).responses[0].partition_responses[0].base_offset == 1


def test_set_coordinator(kafka_cluster):
    c = kafka_cluster
    c.set_coordinator("g", 2)
    with Raw(c.bootstrap) as raw:
        r = raw.call(FindCoordinatorRequest(key="g", key_type=0), 3)
        assert (r.error_code, r.node_id, r.port) == (0, 2, c.nodes[2].port)
        r = raw.call(FindCoordinatorRequest(coordinator_keys=["g", "h"], key_type=0), 4)
        assert r.coordinators[0].node_id == 2
    c.stop_node(2)
    with Raw(c.bootstrap) as raw:
        r = raw.call(FindCoordinatorRequest(key="g", key_type=0), 3)
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE


def test_hooks_error_delay_answer_drop_never(kafka_broker):
    c = kafka_broker
    c.create_topic("t", 1)
    with Raw(c.bootstrap) as raw:
        remove = c.hook("Produce", lambda req: E.NOT_LEADER_OR_FOLLOWER)
        assert code_of(raw.call(produce_req(), 9)) == E.NOT_LEADER_OR_FOLLOWER
        assert c.state.topics["t"].partitions[0].log.log_end_offset == 0   # not written
        remove()
        assert code_of(raw.call(produce_req(), 9)) == 0

        remove = c.hook("Metadata", lambda req: Delay(0.4))
        t0 = time.monotonic()
        raw.call(MetadataRequest(topics=[]), 12)
        assert time.monotonic() - t0 >= 0.35
        remove()

        canned = MetadataResponse(cluster_id="canned", controller_id=7)
        remove = c.hook(3, lambda req: canned)
        assert raw.call(MetadataRequest(topics=[]), 12).cluster_id == "canned"
        remove()

        seen = []
        c.hook(None, lambda req: seen.append((req.api_key, req.body)) or None)
        raw.call(ApiVersionsRequest(), 0)
        assert seen and seen[0][0] == 18

    c.clear_hooks()
    c.hook("Metadata", lambda req: DROP)
    with Raw(c.bootstrap) as raw:
        raw.send(MetadataRequest(topics=[]), 12)
        assert raw.closed()
    c.clear_hooks()
    c.hook("Metadata", lambda req: NEVER)
    with Raw(c.bootstrap) as raw:
        raw.send(MetadataRequest(topics=[]), 12)
        assert not raw.closed(timeout=0.5)   # no answer, connection still open
    c.clear_hooks()
    with Raw(c.bootstrap) as raw:   # other connections are served meanwhile
        assert raw.call(ApiVersionsRequest(), 0).error_code == 0


def test_push_errors_are_used_in_turn(kafka_broker):
    c = kafka_broker
    c.create_topic("t", 1)
    c.push_errors("Produce", [E.REQUEST_TIMED_OUT, 0, E.NOT_ENOUGH_REPLICAS])
    with Raw(c.bootstrap) as raw:
        codes = [code_of(raw.call(produce_req(), 9)) for _ in range(4)]
    assert codes == [E.REQUEST_TIMED_OUT, 0, E.NOT_ENOUGH_REPLICAS, 0]
    assert c.state.topics["t"].partitions[0].log.log_end_offset == 2


def test_cap_versions(kafka_broker):
    c = kafka_broker
    c.cap_versions("Fetch", 11)
    c.cap_versions("DeleteRecords", -1)   # below the minimum: not advertised
    with Raw(c.bootstrap) as raw:
        keys = {k.api_key: k.max_version for k in raw.call(ApiVersionsRequest(), 0).api_keys}
        assert keys[1] == 11 and 21 not in keys
        raw.send(MetadataRequest(topics=[]), 12)
        raw.recv_frame()
        # a request above the advertised version closes the connection, as Kafka does
        from kcodec.protocol import FetchRequest
        raw.send(FetchRequest(max_wait_ms=0, min_bytes=0, topics=[]), 12)
        assert raw.closed()
    c.cap_versions("Fetch", None)


def test_recording(kafka_broker):
    c = kafka_broker
    c.record()
    with Raw(c.bootstrap) as raw:
        raw.call(ApiVersionsRequest(), 0)
        raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="x")]), 12)
    assert [r.api_key for r in c.requests] == [18, 3]
    (md,) = c.recorded("Metadata")
    assert md.api_version == 12 and md.body.topics[0].name == "x" and md.header.client_id == "raw"
    c.record(False)
    with Raw(c.bootstrap) as raw:
        raw.call(ApiVersionsRequest(), 0)
    assert len(c.requests) == 2


def test_restart_on_data_dir_keeps_topics_logs_and_offsets(tmp_path):
    from kcodec.client import Admin, Consumer, Producer

    with Cluster(1, data_dir=tmp_path) as c:
        c.create_topic("keep", 2, configs={"retention.ms": "123456789"})
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(50):
                p.send("keep", b"%d" % i, partition=i % 2)
            p.flush()
        with Consumer(bootstrap_servers=c.bootstrap, group_id="gk", auto_offset_reset="earliest") as con:
            con.subscribe(["keep"])
            n, deadline = 0, time.monotonic() + 20
            while n < 50 and time.monotonic() < deadline:
                n += sum(len(v) for v in con.poll(0.3).values())
            con.commit()
        tid = c.state.topics["keep"].topic_id
    with Cluster(1, data_dir=tmp_path) as c:
        t = c.state.topics["keep"]
        assert t.topic_id == tid and len(t.partitions) == 2
        assert t.configs == {"retention.ms": "123456789"}
        assert sum(p.log.log_end_offset for p in t.partitions.values()) == 50
        with Admin(bootstrap_servers=c.bootstrap) as admin:
            assert sum(admin.committed_offsets("gk").values()) == 50


def test_a_data_dir_in_use_is_refused_and_free_again_after_stop(tmp_path):
    from kcodec.broker.log.errors import KafkaStorageError

    with Cluster(1, data_dir=tmp_path) as c:
        c.create_topic("kept", 1)
        second = Cluster(1, data_dir=tmp_path)
        with pytest.raises(KafkaStorageError, match=f"data dir {tmp_path} is in use by another "
                                                    "kcodec broker.*stop that one first"):
            second.start()
        assert not second.started
        assert "kept" in c.state.topics              # the first one runs on, untouched
    with Cluster(1, data_dir=tmp_path) as c:         # stopped: the lock was let go
        assert "kept" in c.state.topics


def test_a_failed_start_lets_go_of_the_data_dir(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        c = Cluster(1, data_dir=tmp_path, ports=[taken.getsockname()[1]])
        with pytest.raises(OSError, match="cannot listen on"):
            c.start()
    with Cluster(1, data_dir=tmp_path) as c:
        assert c.started


def test_cli_second_broker_on_a_data_dir_in_use_exits_with_the_cause(tmp_path):
    import subprocess
    import sys

    with Cluster(1, data_dir=tmp_path):
        out = subprocess.run([sys.executable, "-m", "kcodec", "broker", "--data-dir",
                              str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and not out.stdout and "Traceback" not in out.stderr
    assert f"data dir {tmp_path} is in use by another kcodec broker" in out.stderr
