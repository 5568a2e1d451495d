"""The runtime (``kcodec run``): its processes' metrics on one Prometheus endpoint
(``--metrics-port``), and the handler's ``process`` span continuing the producer's trace."""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.request
import uuid

import pytest

from kcodec.testing.net import free_port
from tests.runtime.support import Broker, Run, produce


@pytest.fixture(scope="module")
def kbroker():
    b = Broker()
    yield b
    b.close()


def _scrape(port: int) -> dict[tuple[str, frozenset], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _value(samples: dict, name: str, without: tuple[str, ...] = (), **labels: str) -> float | None:
    """The sum of ``name``'s series that carry ``labels`` and none of the labels ``without``
    (a client total and its per-topic series share a name: count one of them)."""
    want = set(labels.items())
    got = [v for (n, ls), v in samples.items()
           if n == name and want <= ls and not any(k in dict(ls) for k in without)]
    return sum(got) if got else None


def test_kcodec_run_metrics_port(kbroker, tmp_path):
    produce(kbroker.bootstrap, "obs-run", 60)
    port = free_port()
    run = Run(kbroker.bootstrap, "obs-run", "obs-g", "--storage", "direct", "--metrics-port",
              str(port))
    try:
        run.wait_ready()
        deadline = time.monotonic() + 60
        done = consumed = by_topic = None
        while time.monotonic() < deadline:
            try:
                samples = _scrape(port)
            except OSError:
                samples = {}
            done = _value(samples, "kcodec_runtime_worker_done_total", role="puller")
            consumed = _value(samples, "kcodec_consumer_fetch_manager_metrics_records_consumed_total",
                              without=("topic",), role="puller", slot="0")
            by_topic = _value(samples,
                              "kcodec_consumer_fetch_manager_metrics_records_consumed_total",
                              role="puller", topic="obs-run")
            if done == 60 and consumed == 60 and by_topic == 60:
                break
            time.sleep(0.3)
        assert (done, consumed, by_topic) == (60, 60, 60), run.stderr()
        assert _value(samples, "kcodec_runtime_master_processes_alive") == 1
        # the store's backlog, a gauge per queue (direct mode: its retries and failed queue)
        assert _value(samples, "kcodec_runtime_store_pending", storage="direct") == 0
        assert _value(samples, "kcodec_runtime_store_failed", storage="direct") == 0
        assert _value(samples, "kcodec_consumer_coordinator_metrics_rebalance_total",
                      role="puller") == 1
        lag = _value(samples, "kcodec_consumer_fetch_manager_metrics_records_lag", role="puller")
        assert lag == 0
        _real_prometheus_agrees(port, tmp_path)
    finally:
        assert run.stop() == 0


def _real_prometheus_agrees(port: int, tmp_path) -> None:
    """A real Prometheus scraping the runtime's endpoint stores the same counts (skipped,
    with the hint, where the prometheus package is missing)."""
    import shutil
    import subprocess

    from tests.observe.test_prometheus import NO_PROMETHEUS, _wait_value

    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(NO_PROMETHEUS)
    web = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "scrape_configs:\n"
                   f"  - job_name: run\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
    prom = subprocess.Popen([binary, f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{web}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{web}"
        assert _wait_value(base, 'sum(kcodec_runtime_worker_done_total{role="puller"})', 60) == 60
        assert _wait_value(base, 'sum(kcodec_consumer_fetch_manager_metrics_records_consumed_total'
                                 '{role="puller",topic="obs-run"})', 60) == 60
        assert _wait_value(base, "kcodec_runtime_master_processes_alive", 1) == 1
    finally:
        prom.terminate()
        prom.wait(10)


def test_kcodec_run_handler_continues_the_producers_trace(kbroker):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kcodec.client import Admin, Producer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        a.create_topics(["obs-tr"], num_partitions=1)
    with Producer(bootstrap_servers=kbroker.bootstrap, tracing_enabled=True,
                  tracer_provider=provider) as p:
        for i in range(3):
            p.send("obs-tr", b"%d" % i, partition=0).result(10)
    sends = {s.context.span_id: s for s in exporter.get_finished_spans() if s.name == "send obs-tr"}
    spans = os.path.join(tempfile.mkdtemp(prefix="kcodec-spans-"), "spans.jsonl")
    run = Run(kbroker.bootstrap, "obs-tr", "obs-tr-g", "--storage", "direct", "--batch-size",
              "1", "-X", "tracing_enabled=true",
              handler="tests.runtime.trace_handler:handle",
              extra_env={"KCODEC_TEST_SPANS": spans})
    try:
        run.wait_ready()
        deadline = time.monotonic() + 60
        got: list = []
        while time.monotonic() < deadline:
            if os.path.exists(spans):
                with open(spans) as f:
                    got = [json.loads(line) for line in f]
            if sum(s["name"] == "process obs-tr" for s in got) >= 3:
                break
            time.sleep(0.3)
    finally:
        assert run.stop() == 0
    procs = [s for s in got if s["name"] == "process obs-tr"]
    inner = [s for s in got if s["name"] == "inside the handler"]
    assert len(procs) == 3 and len(inner) == 3, run.stderr()
    for proc in procs:
        send = sends[proc["parent"]]                  # the child of the producer's send span
        assert proc["trace"] == send.context.trace_id and proc["links"] == [proc["parent"]]
        assert proc["attrs"]["messaging.consumer.group.name"] == "obs-tr-g"
        assert proc["attrs"]["messaging.batch.message_count"] == 1
    assert {s["parent"] for s in inner} == {p["span"] for p in procs}   # the handler's spans nest


@pytest.mark.parametrize("port", [-1, 65536, True, "9100"])
def test_metrics_port_must_be_a_port(port):
    from kcodec.runtime.config import Settings

    with pytest.raises(ValueError, match="--metrics-port must be a port number"):
        Settings(metrics_port=port)


def test_tracing_without_opentelemetry_fails_once_with_the_extra(monkeypatch):
    import sys

    from kcodec.runtime.config import Settings

    monkeypatch.setitem(sys.modules, "opentelemetry", None)     # as if not installed
    s = Settings(topics=["t"], group="g", client={"tracing_enabled": True})
    with pytest.raises(ValueError, match=r"tracing_enabled.*pip install 'kcodec\[otel\]'"):
        s.ready()
    Settings(topics=["t"], group="g", client={"tracing_enabled": False}).ready()


def test_metrics_port_in_use_is_a_clear_error(kbroker):
    import socket

    produce(kbroker.bootstrap, "obs-busy", 1)    # (kcodec run checks the topic first)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = Run(kbroker.bootstrap, "obs-busy", "obs-busy-g", "--storage", "direct",
                  "--metrics-port", str(port))
        try:
            code = run.proc.wait(60)
        finally:
            run.stop()
    assert code == 1
    assert f"--metrics-port {port}: cannot listen" in run.stderr()


@pytest.mark.parametrize("is_async", [False, True])
def test_a_batch_span_links_every_records_trace_and_records_the_handlers_error(is_async):
    from collections import namedtuple

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kcodec.observe.tracing import Tracing, inject
    from kcodec.runtime.handler import Runner

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    Rec = namedtuple("Rec", "topic partition offset headers")
    records, sends = [], []
    for i in range(3):
        with tracer.start_as_current_span("send") as s:
            sends.append(s.get_span_context().span_id)
            records.append(Rec("bt", 0, i, inject([])))
    records.append(Rec("bt", 0, 3, None))                 # no trace context: no link

    def sync(recs):
        raise KeyError("boom")

    async def coro(recs):
        raise KeyError("boom")

    runner = Runner(coro if is_async else sync, 10, Tracing("c", provider, group_id="g"))
    try:
        runner.start(records)
        errors = None
        while errors is None:
            errors = runner.wait(5)
    finally:
        runner.close()
    assert len(errors) == 4 and all("boom" in e for e in errors)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "process bt"]
    assert span.parent is None                               # a batch: links, no parent
    assert [lk.context.span_id for lk in span.links] == sends
    assert span.attributes["messaging.batch.message_count"] == 4
    assert span.attributes["messaging.consumer.group.name"] == "g"
    assert span.attributes["error.type"] == "KeyError"
    assert not span.status.is_ok


def test_the_store_backlog_gauges_count_a_redis_stores_queues(kbroker, redis_server) -> None:
    """The backlog gauges of a Redis store, read from a real redis-server: odd offsets fail
    every delivery (no retries), so those records end in the failed queue, and the gauge
    says so, as ctl backlog does; nothing waits once the rest is done."""
    topic = f"obs-redis-{uuid.uuid4().hex[:6]}"
    produce(kbroker.bootstrap, topic, 40)
    port = free_port()
    run = Run(kbroker.bootstrap, topic, f"g-{uuid.uuid4().hex[:6]}", "--storage", "redis",
              "--redis-url", redis_server.url, "--redis-prefix", f"p-{uuid.uuid4().hex[:6]}",
              "--retries", "0", "--metrics-port", str(port), mode="fail-odd",
              extra_env={"KCODEC_RUN_CLIENT_GROUP_PROTOCOL": "classic"})
    try:
        run.wait_ready()
        deadline = time.monotonic() + 60
        failed = pending = None
        # produce() spreads the 40 over 4 partitions: the odd offsets of each
        odd = 0
        while time.monotonic() < deadline:
            seen = run.handled()
            odd = sum(1 for k in seen if k[2] % 2)
            try:
                samples = _scrape(port)
            except OSError:
                samples = {}
            failed = _value(samples, "kcodec_runtime_store_failed", storage="redis")
            pending = _value(samples, "kcodec_runtime_store_pending", storage="redis")
            if len(seen) == 40 and failed == odd and pending == 0:
                break
            time.sleep(0.3)
        assert odd > 0 and (len(seen), failed, pending) == (40, odd, 0), run.stderr()
        assert run.ctl("backlog")["failed"] == odd
        assert _value(samples, "kcodec_runtime_store_delayed", storage="redis") == 0
    finally:
        assert run.stop() == 0
