"""Bad input: garbage, oversized, truncated and hostile frames, unknown API keys. The broker
closes that connection (or answers with an error), keeps serving the others, and holds no
memory for what it refused."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from kcodec.broker import Cluster, Delay
from kcodec.protocol import ApiVersionsRequest, MetadataRequest, ProduceRequest, encode_request
from tests.support.broker_raw import Raw


@pytest.fixture
def kb():
    with Cluster(1, max_request_bytes=1 << 20, idle_timeout_s=30) as c:
        c.create_topic("t", 1)
        yield c


def alive(c):
    with Raw(c.bootstrap) as raw:
        return raw.call(ApiVersionsRequest(), 0).error_code == 0


def send_raw(c, data: bytes) -> Raw:
    raw = Raw(c.bootstrap)
    raw.sock.sendall(data)
    return raw


@pytest.mark.parametrize("data", [
    struct.pack(">i", 20) + b"\xff" * 20,                        # garbage header and body
    struct.pack(">i", 0x7FFFFFFF),                               # oversized: 2 GiB announced
    struct.pack(">i", (1 << 20) + 1) + b"x" * 100,               # just above the limit
    struct.pack(">i", -5),                                       # negative size
    struct.pack(">i", 3) + b"abc",                               # shorter than a header
    struct.pack(">ihhi", 8, 999, 0, 1),                          # unknown API key
    struct.pack(">ihhi", 8, 3, 77, 1),                           # Metadata v77
    struct.pack(">ihhih", 12, 3, 1, 1, -1) + b"\x7f\xff",        # Metadata v1 cut in the body
])
def test_bad_frames_close_the_connection_and_others_are_served(kb, data):
    raw = send_raw(kb, data)
    assert raw.closed()
    raw.close()
    assert alive(kb)
    assert kb.nodes[0].channel.queued_bytes == 0


def test_hostile_counts_are_refused_before_allocating(kb):
    # Metadata v1: topics array claims 2**31-1 entries in a 20-byte body
    body = struct.pack(">hhih", 3, 1, 5, 3) + b"raw" + struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 6
    raw = send_raw(kb, struct.pack(">i", len(body)) + body)
    assert raw.closed()
    raw.close()
    # a produce whose records are garbage gets CORRUPT_MESSAGE, the connection stays usable
    P = ProduceRequest
    with Raw(kb.bootstrap) as raw:
        for junk in (b"\x00" * 61, b"\xff" * 200, struct.pack(">qi", 0, 0x7FFFFFF0) + b"\x02" * 60):
            r = raw.call(P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
                P.PartitionProduceData(index=0, records=junk)])]), 9)
            assert r.responses[0].partition_responses[0].error_code in (2, 87)  # CORRUPT_MESSAGE / INVALID_RECORD
        assert raw.call(ApiVersionsRequest(), 0).error_code == 0
    assert kb.state.topics["t"].partitions[0].log.log_end_offset == 0


def test_truncated_frame_then_hang_up(kb):
    raw = send_raw(kb, struct.pack(">i", 1000) + b"\x00\x03\x00\x01")
    raw.close()   # the client goes away mid-frame
    assert alive(kb)


def test_mutated_requests_never_break_the_broker(kb):
    rng = random.Random(1234)
    M = MetadataRequest
    good = [encode_request(M(topics=[M.MetadataRequestTopic(name="t")]), v, 1) for v in (1, 4, 9, 12)]
    good.append(encode_request(ApiVersionsRequest(client_software_name="x",
                                                  client_software_version="1"), 3, 1))
    for i in range(150):
        frame = bytearray(rng.choice(good))
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(4, len(frame))
            frame[pos] = rng.randrange(256)
        if i % 5 == 0:
            frame[:4] = struct.pack(">i", len(frame) - 4)
        raw = Raw(kb.bootstrap, timeout=5)
        raw.sock.sendall(bytes(frame))
        raw.sock.shutdown(socket.SHUT_WR)
        try:
            while raw.sock.recv(65536):
                pass
        except OSError:
            pass
        raw.close()
    assert alive(kb)
    deadline = time.monotonic() + 5
    while kb.nodes[0].connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kb.nodes[0].connections == 0
    assert kb.nodes[0].channel.queued_bytes == 0


def test_idle_connections_are_closed():
    with Cluster(1, idle_timeout_s=0.5) as c, Raw(c.bootstrap) as raw:
        raw.call(ApiVersionsRequest(), 0)
        assert raw.closed(timeout=3)


def test_queued_bytes_limit_still_serves_big_requests():
    # a global budget smaller than one request: one request is always let through
    with Cluster(1, queued_max_bytes=1000) as c:
        c.create_topic("t", 1)
        from kcodec.records import RecordBatchBuilder
        b = RecordBatchBuilder()
        b.append(None, b"x" * 5000, [], int(time.time() * 1000))
        P = ProduceRequest
        req = P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
            P.PartitionProduceData(index=0, records=b.build())])])
        clients = [Raw(c.bootstrap) for _ in range(4)]
        for r in clients:
            r.send(req, 9)
        from kcodec.protocol import decode_response
        for r in clients:
            assert decode_response(r.recv_frame(), 0, 9)[1].responses[0].partition_responses[0].error_code == 0
            r.close()
        assert c.state.topics["t"].partitions[0].log.log_end_offset == 4


def test_a_peer_stalling_mid_frame_is_closed_when_idle():
    with Cluster(1, idle_timeout_s=0.5) as c:
        raw = send_raw(c, struct.pack(">i", 100) + b"\x00\x12")
        assert raw.closed(timeout=4)
        raw.close()
        assert alive(c)


def test_the_global_budget_holds_reads_back_until_there_is_room():
    with Cluster(1, queued_max_bytes=100) as c:
        c.create_topic("t", 1)
        remove = c.hook("Metadata", lambda req: Delay(0.5))
        M = MetadataRequest
        slow = Raw(c.bootstrap)
        slow.send(M(topics=[M.MetadataRequestTopic(name="t" * 80)]), 12)   # holds ~100 bytes
        time.sleep(0.1)
        assert c.nodes[0].channel.queued_bytes > 0
        t0 = time.monotonic()
        with Raw(c.bootstrap) as other:   # waits for the budget, then is served
            assert other.call(M(topics=[M.MetadataRequestTopic(name="u" * 80)]), 12).topics
        assert time.monotonic() - t0 >= 0.25
        slow.recv_frame()
        slow.close()
        remove()
