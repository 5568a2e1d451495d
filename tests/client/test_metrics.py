"""The client's metrics against kcodec's broker: the counts are what the test did."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from kcodec.broker.cluster import Cluster
from kcodec.client import Admin, Consumer, Producer, TopicPartition

FAST = dict(request_timeout_ms=5000, api_timeout_ms=10000)


@pytest.fixture
def broker():
    with Cluster(1, num_partitions=1) as c:
        c.create_topic("m", 2)
        yield c


def _produce(bootstrap: str, n: int, **kw) -> dict:
    with Producer(bootstrap_servers=bootstrap, linger_ms=1, **FAST, **kw) as p:
        for i in range(n):
            p.send("m", b"value-%d" % i, key=b"k%d" % i)
        p.flush()
        return p.metrics()


def test_producer_counts_records_batches_and_requests(broker):
    m = _produce(broker.bootstrap, 200, client_id="prod-1")
    pm = m["producer-metrics"]
    assert pm["record-send-total"] == 200
    assert pm["record-error-total"] == 0 and pm["record-retry-total"] == 0
    by_topic = {x["tags"]["topic"]: x["value"] for x in m["producer-topic-metrics"]["record-send-total"]}
    assert by_topic == {"m": 200}
    # every Produce request the producer sent reached the broker, and the broker counted it
    node = {x["tags"]["api"]: x["value"]
            for x in m["producer-node-metrics"]["request-total"] if "api" in x["tags"]}
    broker_side = broker.nodes[0].metrics.registry.value(
        "kafka.network:RequestMetrics", "RequestsPerSec-total", request="Produce")
    assert node["Produce"] == broker_side >= 1
    assert pm["batch-size-count"] >= 2                   # two partitions: two batches at least
    assert pm["buffer-available-bytes"] == pm["buffer-total-bytes"] == 32 * 1048576
    assert pm["compression-rate-avg"] == 1.0             # no compression
    assert m["producer-metrics"]["connection-creation-total"] >= 1
    # the broker saw exactly these records
    reg = broker.nodes[0].metrics.registry
    assert reg.value("kafka.server:BrokerTopicMetrics", "MessagesInPerSec-total") == 200
    assert reg.value("kafka.server:BrokerTopicMetrics", "MessagesInPerSec-total", topic="m") == 200
    ends = [reg.value("kafka.log:Log", "LogEndOffset", topic="m", partition=i) for i in (0, 1)]
    assert sum(ends) == 200
    assert reg.value("kafka.log:Log", "Size", topic="m", partition=0) > 0
    assert reg.value("kafka.server:ReplicaManager", "LeaderCount") == 2
    assert reg.value("kafka.server:ReplicaManager", "UnderReplicatedPartitions") == 0


def test_compression_rate_is_below_one_when_compressed(broker):
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=50, compression_type="gzip",
                  **FAST) as p:
        for _ in range(100):
            p.send("m", b"a" * 200, partition=0)
        p.flush()
        rate = p.metrics()["producer-metrics"]["compression-rate-avg"]
    assert 0 < rate < 0.2


def test_consumer_counts_lag_and_lead(broker):
    _produce(broker.bootstrap, 100)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=10, fetch_max_wait_ms=50, **FAST) as c:
        tp = TopicPartition("m", 0)
        c.assign([tp])
        got = 0
        deadline = time.monotonic() + 20
        while got < 30 and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(0.5, max_records=min(10, 30 - got)).values())
        assert got == 30
        hw = c.highwater(tp)
        m = c.metrics()
        fm = m["consumer-fetch-manager-metrics"]
        assert fm["records-consumed-total"] == 30
        lag = {x["tags"]["partition"]: x["value"] for x in fm["records-lag"]}
        lead = {x["tags"]["partition"]: x["value"] for x in fm["records-lead"]}
        assert lag == {"0": hw - 30} and lead == {"0": 30}
        assert fm["records-lag-max"] == hw - 30
        assert fm["fetch-total"] >= 1 and fm["fetch-latency-count"] == fm["fetch-total"]
        assert fm["bytes-consumed-total"] > 0
        assert m["consumer-metrics"]["poll-idle-ratio-count"] >= 1


def test_consumer_group_rebalance_and_commit_metrics(broker, caplog):
    _produce(broker.bootstrap, 10)
    with caplog.at_level("INFO", logger="kcodec"):
        with Consumer("m", bootstrap_servers=broker.bootstrap, group_id="g1",
                      auto_offset_reset="earliest", enable_auto_commit=False, **FAST) as c:
            got = 0
            deadline = time.monotonic() + 20
            while got < 10 and time.monotonic() < deadline:
                got += sum(len(v) for v in c.poll(0.5).values())
            c.commit()
            c.commit()
            cm = c.metrics()["consumer-coordinator-metrics"]
    assert cm["rebalance-total"] == 1 and cm["failed-rebalance-total"] == 0
    assert cm["rebalance-latency-count"] == 1 and cm["rebalance-latency-max"] > 0
    assert cm["commit-total"] == 2 and cm["commit-latency-count"] == 2
    assert cm["assigned-partitions"] == 2
    lines = [r.getMessage() for r in caplog.records]
    assert any("joined generation 1" in x and "m[0, 1]" in x for x in lines), lines
    assert any(x.startswith("connected to") for x in lines)


def test_errors_by_code_are_counted(broker):
    with Admin(bootstrap_servers=broker.bootstrap, **FAST) as a:
        a.create_topics(["dup"], 1)
        a.create_topics(["dup"], 1)               # TOPIC_ALREADY_EXISTS
    reg = broker.nodes[0].metrics.registry
    assert reg.value("kafka.network:RequestMetrics", "ErrorsPerSec-total",
                     request="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1


def test_statistics_reach_stats_cb_as_json(broker):
    docs: list[str] = []
    got = threading.Event()

    def cb(text: str) -> None:
        docs.append(text)
        if len(docs) >= 2:
            got.set()
    with Producer(bootstrap_servers=broker.bootstrap, statistics_interval_ms=100, stats_cb=cb,
                  client_id="stats-1", **FAST) as p:
        p.send("m", b"x", partition=1).result(10)
        assert got.wait(10)
    doc = json.loads(docs[-1])
    assert doc["name"] == doc["client_id"] == "stats-1" and doc["type"] == "producer"
    assert set(doc) >= {"ts", "time", "age", "brokers", "topics", "cgrp", "metrics"}
    (b,) = doc["brokers"].values()
    assert b["nodeid"] == 0 and b["state"] == "UP" and b["tx"] >= 2 and b["rtt"]["cnt"] >= 2
    assert doc["metrics"]["producer-metrics"]["record-send-total"] == 1
    assert doc["topics"]["m"]["partitions"]["1"]["leader"] == 0


def test_consumer_statistics_carry_lag(broker):
    _produce(broker.bootstrap, 20)
    docs: list[dict] = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  statistics_interval_ms=100, stats_cb=lambda t: docs.append(json.loads(t)),
                  max_poll_records=5, **FAST) as c:
        c.assign([TopicPartition("m", 0), TopicPartition("m", 1)])
        n = 0
        while n < 5:
            n += sum(len(v) for v in c.poll(1.0, max_records=5 - n).values())
        time.sleep(0.3)
        hw = c.highwater(TopicPartition("m", 0)) + c.highwater(TopicPartition("m", 1))
    parts = docs[-1]["topics"]["m"]["partitions"]
    assert sum(p["app_offset"] for p in parts.values()) == 5
    assert sum(p["consumer_lag"] for p in parts.values()) == hw - 5
    assert docs[-1]["cgrp"] == {}


def test_settings_are_checked():
    with pytest.raises(ValueError, match="statistics_interval_ms needs stats_cb"):
        Producer(bootstrap_servers="127.0.0.1:1", statistics_interval_ms=10)
    with pytest.raises(ValueError, match="unknown context 'nope'"):
        Producer(bootstrap_servers="127.0.0.1:1", debug="broker,nope")
    with pytest.raises(ValueError, match="stats_cb must be callable"):
        Consumer(bootstrap_servers="127.0.0.1:1", stats_cb="x")


def test_metrics_off_costs_nothing_and_says_so(broker):
    with Producer(bootstrap_servers=broker.bootstrap, metrics_enabled=False, **FAST) as p:
        p.send("m", b"x", partition=0).result(10)
        assert p._engine.cluster.metrics is None
        with pytest.raises(ValueError, match="metrics_enabled=False"):
            p.metrics()


def test_confluent_style_settings_are_taken():
    from kcodec.client.config import ConsumerConfig

    cfg = ConsumerConfig.from_kwargs({"statistics.interval.ms": "500", "stats_cb": print,
                                      "debug": "cgrp,fetch", "enable.metrics.push": "false"})
    assert cfg.statistics_interval_ms == 500 and cfg.debug == "cgrp,fetch"
    assert cfg.enable_metrics_push is False
    assert not math.isnan(0.0)


def test_the_operations_guide_metrics_example_runs(broker):
    """The metrics example of docs/guide/operations.md, as written (its address swapped)."""
    from tests.support import project_text

    guide = project_text("docs", "guide", "operations.md")
    start = guide.index("## Metrics")
    block = guide[start:].split("```python\n", 1)[1].split("```", 1)[0]
    assert "stats_cb" in block
    scope: dict = {}
    exec(compile(block.replace("127.0.0.1:9092", broker.bootstrap), "operations.md", "exec"),
         scope)
    p = scope["p"]
    try:
        assert p.metrics()["producer-metrics"]["record-send-total"] == 1
        deadline = time.monotonic() + 10
        while not scope["stats"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(scope["stats"][0])["type"] == "producer"
    finally:
        p.close()
