"""Fetch from follower (KIP-392, kcodec/broker/apis/fetch.py): the leader's
preferred_read_replica answer under the rack-aware selector, followers serving consumer
fetches of v11+, the leader-only cases, fetch sessions on a follower, and librdkafka
(confluent-kafka) with client.rack reading from the follower in its rack."""

from __future__ import annotations

import json
import time

import pytest

from kcodec.broker import RACK_AWARE_SELECTOR, Cluster
from kcodec.broker.state import now_ms
from kcodec.protocol import ErrorCode, FetchRequest, ListOffsetsRequest
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw

E = ErrorCode
F = FetchRequest
TOPIC = "fff"
N = 50


def _fill(c: Cluster, topic: str, n: int, index: int = 0) -> None:
    log = c.state.partition(topic, index).log
    for i in range(n):
        b = RecordBatchBuilder()
        b.append(b"k%d" % i, b"value-%d" % i, [], 1_700_000_000_000 + i)
        log.append(b.build(), now_ms=now_ms())


@pytest.fixture(scope="module")
def racked():
    # leader 0 in RACK0; followers 1 and 2 in RACK1 and RACK2; node 3 holds no replica
    with Cluster(4, config={"broker.rack": "RACK{id}",
                            "replica.selector.class": RACK_AWARE_SELECTOR}) as c:
        c.create_topic(TOPIC, 1, leaders=[0], replication_factor=3)
        assert c.replicas_of(TOPIC, 0) == [0, 1, 2]
        _fill(c, TOPIC, N)
        yield c


def fetch(raw: Raw, version: int, rack: str = "", offset: int = 0, replica_id: int = -1,
          session: tuple[int, int] = (0, -1), topics: bool = True, max_wait_ms: int = 0,
          min_bytes: int = 0, topic: str = TOPIC):
    kw = {"replica_id": replica_id} if version < 15 else (
        {"replica_state": F.ReplicaState(replica_id=replica_id)} if replica_id >= 0 else {})
    part = F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    t = F.FetchTopic(topic=topic, partitions=[part])
    return raw.call(F(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                      session_id=session[0], session_epoch=session[1],
                      topics=[t] if topics else [], rack_id=rack, **kw), version)


def only(resp):
    [t] = resp.responses
    [p] = t.partitions
    return p


def test_the_leader_sends_a_consumer_to_the_follower_in_its_rack(racked):
    with Raw(racked.nodes[0].address) as raw:
        p = only(fetch(raw, 12, rack="RACK1"))
        assert (p.error_code, p.preferred_read_replica, p.records) == (0, 1, b"")
        assert (p.high_watermark, p.log_start_offset) == (N, 0)
        # at once, even when the fetch would otherwise wait for min_bytes
        began = time.monotonic()
        p = only(fetch(raw, 12, rack="RACK2", offset=N, max_wait_ms=3000, min_bytes=1))
        assert p.preferred_read_replica == 2 and time.monotonic() - began < 2


@pytest.mark.parametrize("rack, why", [("", "no client rack"), ("RACK0", "the leader's rack"),
                                       ("RACK3", "no replica there (node 3 holds none)"),
                                       ("elsewhere", "no node there")])
def test_the_leader_serves_itself_otherwise(racked, rack, why):
    with Raw(racked.nodes[0].address) as raw:
        p = only(fetch(raw, 12, rack=rack))
        assert p.error_code == 0 and p.preferred_read_replica == -1, why
        assert p.records


def test_no_preferred_replica_beyond_the_log_or_without_the_selector(racked):
    with Raw(racked.nodes[0].address) as raw:
        p = only(fetch(raw, 12, rack="RACK1", offset=N + 5))
        assert (p.error_code, p.preferred_read_replica) == (E.OFFSET_OUT_OF_RANGE, -1)
    with Cluster(3, config={"broker.rack": "RACK{id}"}) as c:
        c.create_topic(TOPIC, 1, leaders=[0], replication_factor=3)
        _fill(c, TOPIC, 3)
        with Raw(c.nodes[0].address) as raw:
            p = only(fetch(raw, 12, rack="RACK1"))
            assert p.preferred_read_replica == -1 and p.records


def test_a_stopped_follower_is_not_preferred():
    with Cluster(3, config={"broker.rack": "RACK{id}",
                            "replica.selector.class": RACK_AWARE_SELECTOR}) as c:
        c.create_topic(TOPIC, 1, leaders=[0], replication_factor=3)
        _fill(c, TOPIC, 3)
        c.stop_node(1)
        with Raw(c.nodes[0].address) as raw:
            assert only(fetch(raw, 12, rack="RACK1")).preferred_read_replica == -1


@pytest.mark.parametrize("version", [11, 12])
def test_a_follower_serves_a_consumers_fetch(racked, version):
    with Raw(racked.nodes[1].address) as raw:
        p = only(fetch(raw, version, rack="RACK1"))
        assert (p.error_code, p.high_watermark, p.preferred_read_replica) == (0, N, -1)
        assert p.records
        # a follower never redirects, whatever the client's rack
        assert only(fetch(raw, version, rack="RACK2")).preferred_read_replica == -1


def test_a_follower_serves_by_topic_id(racked):
    tid = racked.state.topics[TOPIC].topic_id
    with Raw(racked.nodes[2].address) as raw:
        part = F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        r = raw.call(F(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       topics=[F.FetchTopic(topic_id=tid, partitions=[part])],
                       rack_id="RACK2"), 16)
        p = only(r)
        assert p.error_code == 0 and p.records and p.high_watermark == N


@pytest.mark.parametrize("node, version, replica_id, why", [
    (1, 10, -1, "before v11 a consumer reads from the leader only"),
    (1, 12, 2, "a broker's (replication) fetch: leader only"),
    (3, 12, -1, "node 3 holds no replica"),
])
def test_not_leader_or_follower(racked, node, version, replica_id, why):
    with Raw(racked.nodes[node].address) as raw:
        p = only(fetch(raw, version, replica_id=replica_id, rack="RACK1"))
        assert p.error_code == E.NOT_LEADER_OR_FOLLOWER, why
        assert p.records == b""


def test_list_offsets_stays_with_the_leader(racked):
    L = ListOffsetsRequest
    req = L(replica_id=-1, topics=[L.ListOffsetsTopic(name=TOPIC, partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    with Raw(racked.nodes[1].address) as raw:
        assert raw.call(req, 7).topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
    with Raw(racked.nodes[0].address) as raw:
        p = raw.call(req, 7).topics[0].partitions[0]
        assert (p.error_code, p.offset) == (0, N)


def test_an_incremental_session_on_a_follower(racked):
    racked.create_topic("sess", 1, leaders=[0], replication_factor=3)
    _fill(racked, "sess", 3)
    with Raw(racked.nodes[1].address) as raw:
        opened = fetch(raw, 12, rack="RACK1", offset=1, session=(0, 0), topic="sess")
        sid = opened.session_id
        assert opened.error_code == 0 and sid != 0 and only(opened).records
        # read to the end: nothing new, the partition is left out
        nxt = fetch(raw, 12, rack="RACK1", offset=3, session=(sid, 1), topic="sess")
        assert nxt.error_code == 0 and nxt.responses == []
        _fill(racked, "sess", 1)                  # the follower sees the new high watermark
        p = only(fetch(raw, 12, rack="RACK1", session=(sid, 2), topics=False, topic="sess"))
        assert p.high_watermark == 4 and p.records
    with Raw(racked.nodes[0].address) as raw:
        # on the leader, a session lists a partition whose answer is a preferred replica
        opened = fetch(raw, 12, rack="RACK1", session=(0, 0), topic="sess")
        assert only(opened).preferred_read_replica == 1
        again = fetch(raw, 12, rack="RACK1", session=(opened.session_id, 1), topics=False,
                      topic="sess")
        assert only(again).preferred_read_replica == 1


# ---------------------------------------------------------------- clients
def _rx_bytes(stats: dict) -> dict[int, int]:
    return {b["nodeid"]: b["rxbytes"] for b in stats["brokers"].values() if b["nodeid"] >= 0}


@pytest.mark.peers
def test_confluent_kafka_with_client_rack_reads_from_the_follower():
    ck = pytest.importorskip("confluent_kafka")
    msgs, size = 1000, 100
    with Cluster(3, config={"broker.rack": "RACK{id}",
                            "replica.selector.class": RACK_AWARE_SELECTOR,
                            "group.initial.rebalance.delay.ms": 0}) as c:
        c.create_topic("ff", 1, leaders=[0], replication_factor=3)
        p = ck.Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 5})
        for i in range(msgs):
            p.produce("ff", (b"msg=%d\n" % i).ljust(size, b"x"))
        assert p.flush(30) == 0
        stats: list[dict] = []
        con = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "ff",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "client.rack": "RACK1", "statistics.interval.ms": 500,
                           "stats_cb": lambda s: stats.append(json.loads(s))})
        con.subscribe(["ff"])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < msgs and time.monotonic() < deadline:
            m = con.poll(0.5)
            if m is not None and not m.error():
                got.append(int(m.value().split(b"\n")[0][4:]))
        seen = len(stats)
        deadline = time.monotonic() + 10
        while len(stats) <= seen and time.monotonic() < deadline:
            con.poll(0.2)                       # one more statistics event, after the last
        con.close()
        served = {n: c.nodes[n].metrics.bytes_out.value for n in c.nodes}
    assert got == list(range(msgs))
    rx = _rx_bytes(stats[-1])
    assert rx[1] == max(rx.values()) and rx[1] > msgs * size, rx
    # the broker's side: node 1 sent the records, the leader none of them
    assert served[1] >= msgs * size and served[0] < size, served


def test_kcodecs_consumer_reads_a_racked_cluster_from_the_leaders():
    # kcodec's own client sends no client rack (rack_id ""): the leaders serve it
    from kcodec.client import Consumer, TopicPartition

    with Cluster(3, config={"broker.rack": "RACK{id}",
                            "replica.selector.class": RACK_AWARE_SELECTOR}) as c:
        c.create_topic("kc", 3, replication_factor=3)
        for i in range(3):
            _fill(c, "kc", 20, index=i)
        got: dict[int, list[int]] = {0: [], 1: [], 2: []}
        with Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest") as con:
            con.assign([TopicPartition("kc", i) for i in range(3)])
            deadline = time.monotonic() + 30
            while sum(map(len, got.values())) < 60 and time.monotonic() < deadline:
                for tp, rs in con.poll(0.5).items():
                    got[tp.partition] += [r.offset for r in rs]
        leaders = {c.leader_of("kc", i) for i in range(3)}
        served = {n for n in c.nodes if c.nodes[n].metrics.bytes_out.value}
    assert got == {i: list(range(20)) for i in range(3)}
    assert served == leaders

