"""Small Produce and Fetch requests run on the processor that read them (no hand-off to a
handler thread and back); large ones, every other API, every request while test hooks are
installed, and all of them with ``network.inline.requests=false`` go to the handlers. What
an inline request waits for is a future: a long-polling fetch holds up none of the other
connections of its processor, and a handler that raises closes only its connection."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.broker import apis as broker_apis
from kcodec.protocol import FetchRequest, MetadataRequest, ProduceRequest
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw

P = ProduceRequest


def _batch(value: bytes) -> bytes:
    b = RecordBatchBuilder()
    b.append(None, value, [], int(time.time() * 1000))
    return b.build()


def _produce(raw: Raw, topic: str, value: bytes) -> int:
    r = raw.call(P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=_batch(value))])]), 9)
    return r.responses[0].partition_responses[0].error_code


def _fetch(topic: str, offset: int, max_wait_ms: int) -> FetchRequest:
    F = FetchRequest
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, topics=[F.FetchTopic(topic=topic, partitions=[
                 F.FetchPartition(partition=0, fetch_offset=offset, log_start_offset=-1,
                                  partition_max_bytes=1 << 20)])])


@pytest.fixture
def threads_of(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[str]]:
    """The name of the thread each Produce, Fetch and Metadata ran on, by API key."""
    seen: dict[int, list[str]] = {0: [], 1: [], 3: []}
    for key in seen:
        original = broker_apis.HANDLERS[key]

        def record(node, req, _original=original, _key=key):
            seen[_key].append(threading.current_thread().name)
            return _original(node, req)
        monkeypatch.setitem(broker_apis.HANDLERS, key, record)
    return seen


def _topic(c: Cluster) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    c.create_topic(name, 1, configs={"max.message.bytes": str(4 << 20)})
    return name


@pytest.mark.parametrize("inline", [True, False])
def test_small_produce_and_fetch_run_on_the_processor(threads_of, inline) -> None:
    with Cluster(1, config={"network.inline.requests": inline}) as c:
        topic = _topic(c)
        with Raw(c.bootstrap) as raw:
            assert raw.call(MetadataRequest(topics=None), 1).brokers
            assert _produce(raw, topic, b"small") == 0
            assert _produce(raw, topic, b"x" * (1100 * 1024)) == 0    # a large Produce
            r = raw.call(_fetch(topic, 0, 0), 11)
            assert r.responses[0].partitions[0].high_watermark == 2
            channel = c.nodes[0].channel
            assert channel.pending == 0 and channel.queued_bytes == 0    # all given back
    small, large = threads_of[0]
    assert "-handler-" in threads_of[3][0]        # not an inline API
    assert "-large-handler-" in large
    if inline:
        assert "-proc-" in small and "-proc-" in threads_of[1][0]
    else:
        assert "-handler-" in small and "-handler-" in threads_of[1][0]


def test_with_hooks_installed_every_request_goes_to_the_handlers(threads_of) -> None:
    with Cluster(1) as c:
        topic = _topic(c)
        remove = c.hooks.add(0, lambda req: None)
        try:
            with Raw(c.bootstrap) as raw:
                assert _produce(raw, topic, b"hooked") == 0
                assert c.nodes[0].channel.pending == 0      # counted once, done once
        finally:
            remove()
    assert "-handler-" in threads_of[0][0]


def test_a_long_polling_fetch_holds_up_no_other_connection_of_its_processor() -> None:
    with Cluster(1, processors=1) as c:            # every connection on one processor
        topic = _topic(c)
        with Raw(c.bootstrap) as waiting, Raw(c.bootstrap) as other:
            t0 = time.monotonic()
            waiting.send(_fetch(topic, 0, 3000), 11)          # parked: nothing to read yet
            time.sleep(0.2)
            assert _produce(other, topic, b"meanwhile") == 0
            answered = time.monotonic() - t0
            # the produce is answered at once, and completes the parked fetch
            assert answered < 2.0
            frame = waiting.recv_frame()
            assert time.monotonic() - t0 < 2.5 and len(frame) > 100


def test_an_inline_handler_that_raises_closes_only_its_connection(monkeypatch) -> None:
    original = broker_apis.HANDLERS[0]

    def boom(node, req):
        if b"boom" in req.frame:
            raise RuntimeError("a bug in the produce handler")
        return original(node, req)
    monkeypatch.setitem(broker_apis.HANDLERS, 0, boom)
    with Cluster(1, processors=1) as c:
        topic = _topic(c)
        with Raw(c.bootstrap) as bad, Raw(c.bootstrap) as good:
            bad.send(P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name=topic, partition_data=[P.PartitionProduceData(
                    index=0, records=_batch(b"boom"))])]), 9)
            assert bad.closed(5.0)
            assert _produce(good, topic, b"fine") == 0
