"""Prometheus: the exposition text, and a real Prometheus server scraping kcodec's broker
(``kcodec broker --metrics-port``) and a producer (``serve_prometheus``); the values it
stored are what the test did."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from kcodec.observe.metrics import Registry
from kcodec.testing.net import free_port

pytest.importorskip("prometheus_client", reason="pip install 'kcodec[prometheus]'")

NO_PROMETHEUS = ("prometheus is not installed (the observability tests' real Prometheus "
                 "server): run KCODEC_INSTALL_SYSTEM_PACKAGES=1 scripts/test to install it "
                 "with apt-get (Debian, Ubuntu; as root or with sudo), or install the "
                 "prometheus package yourself")


def test_exposition_names_kinds_and_values():
    from kcodec.observe.prometheus import metric_name, render

    r = Registry({"client-id": "p-1"})
    r.counter("producer-metrics", "record-send").inc(7)
    r.counter("producer-topic-metrics", "record-send", {"topic": "a.b"}).inc(3)
    h = r.histogram("producer-node-metrics", "request-latency", {"node-id": "node-0"})
    for v in (1.0, 2.0, 100.0):
        h.record(v)
    r.gauge("producer-metrics", "buffer-available-bytes", lambda: 1024)
    b = Registry({"node-id": 0})
    b.counter("kafka.server:BrokerTopicMetrics", "BytesInPerSec").inc(10)
    text = render(r, b)
    assert 'kcodec_producer_metrics_record_send_total{client_id="p-1"} 7.0' in text
    assert 'kcodec_producer_topic_metrics_record_send_total{client_id="p-1",topic="a.b"} 3.0' in text
    assert 'kcodec_producer_metrics_buffer_available_bytes{client_id="p-1"} 1024.0' in text
    assert ('kcodec_producer_node_metrics_request_latency_count{client_id="p-1",'
            'node_id="node-0"} 3.0') in text
    assert 'request_latency_sum{client_id="p-1",node_id="node-0"} 103.0' in text
    assert 'le="+Inf",node_id="node-0"} 3.0' in text
    assert 'kafka_server_brokertopicmetrics_bytesinpersec_total{node_id="0"} 10.0' in text
    assert metric_name("kafka.log:Log", "Size") == "kafka_log_log_size"


def _query(base: str, promql: str) -> list:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]["result"]


def _wait_value(base: str, promql: str, want: float, timeout: float = 60) -> float | None:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        try:
            res = _query(base, promql)
        except OSError:
            res = []
        if res:
            got = float(res[0]["value"][1])
            if got == want:
                return got
        time.sleep(0.5)
    return got


def test_a_real_prometheus_scrapes_the_broker_and_a_producer(tmp_path: Path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(NO_PROMETHEUS)
    from kcodec.client import Producer
    from kcodec.client.metrics import serve_prometheus

    broker = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--json",
                               "--metrics-port", "0"], stdout=subprocess.PIPE, text=True)
    prom = None
    try:
        info = json.loads(broker.stdout.readline())
        broker_target = urllib.parse.urlparse(info["metrics"]).netloc
        n = 123
        with Producer(bootstrap_servers=info["bootstrap"], client_id="scraped", linger_ms=1,
                      api_timeout_ms=15000) as p:
            for i in range(n):
                p.send("obs", b"x%d" % i, partition=0)
            p.flush()
            exporter = serve_prometheus(p, port=0)
            port = free_port()
            cfg = tmp_path / "prometheus.yml"
            cfg.write_text(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                f"  - job_name: broker\n    static_configs: [{{targets: ['{broker_target}']}}]\n"
                f"  - job_name: client\n    static_configs: "
                f"[{{targets: ['127.0.0.1:{exporter.port}']}}]\n")
            prom = subprocess.Popen(
                [binary, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base = f"http://127.0.0.1:{port}"
            try:
                assert _wait_value(base, 'kcodec_producer_metrics_record_send_total'
                                         '{client_id="scraped"}', n) == n
                assert _wait_value(base, 'kafka_server_brokertopicmetrics_messagesinpersec_total'
                                         '{topic="obs"}', n) == n
                produce = _wait_value(base, 'kafka_network_requestmetrics_requestspersec_total'
                                            '{request="Produce"}', -1, timeout=5)
                client_produce = _wait_value(
                    base, 'kcodec_producer_node_metrics_request_total{api="Produce"}', -1,
                    timeout=5)
                assert produce is not None and produce == client_produce >= 1, \
                    (produce, client_produce, _query(base, '{__name__=~".*requestspersec.*"}'))
                size = _wait_value(base, 'kafka_log_log_size{topic="obs",partition="0"}', -1,
                                   timeout=5)
                assert size is not None and size > n * 2
                assert _wait_value(base, 'up{job="broker"}', 1) == 1
            finally:
                exporter.close()
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(10)
        broker.terminate()
        broker.wait(10)
