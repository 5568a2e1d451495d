"""kcodec's client against librdkafka's mock cluster: a broker that advertises ApiVersions
only up to v2 (the fallback), pads flexible responses, and takes injected errors."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kcodec.client import Admin, Consumer, Producer
from kcodec.client.net.core import Connection, Response
from kcodec.protocol import RESPONSES, ApiVersionsRequest, ErrorCode, encode_response

pytestmark = pytest.mark.peers
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)


@pytest.fixture
def mock():
    from tests.support.mock_cluster import MockCluster

    with MockCluster(3) as mc:
        yield mc


def _poll_values(c: Consumer, n: int, timeout: float = 15) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for recs in c.poll(0.5).values():
            got += [r.value for r in recs]
    return got


def test_producer_starts_and_produces_despite_apiversions_v2(mock):
    """The mock answers ApiVersions v3 with UNSUPPORTED_VERSION in a body that decodes at
    no version: the client retries at v0 instead of timing out in its constructor."""
    t = time.monotonic()
    with Producer(bootstrap_servers=mock.bootstrap, **FAST) as p:
        assert time.monotonic() - t < 5
        r = p.send("fallback", b"v", key=b"k").result(10)
        assert r.offset == 0


def test_produce_and_group_consume(mock):
    topic = f"g-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, 3)
    with Producer(bootstrap_servers=mock.bootstrap, **FAST) as p:
        for i in range(30):
            p.send(topic, f"v{i}".encode(), key=str(i).encode())
        p.flush(10)
    c = Consumer(bootstrap_servers=mock.bootstrap, group_id="grp", auto_offset_reset="earliest",
                 enable_auto_commit=False, **FAST)
    try:
        c.subscribe([topic])
        got = _poll_values(c, 30)
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(30))
        c.commit()
        with Admin(bootstrap_servers=mock.bootstrap, **FAST) as admin:
            committed = admin.committed_offsets("grp", [topic])
        assert sum(committed.values()) == 30
    finally:
        c.close()


def test_injected_retriable_errors_are_retried(mock):
    mock.create_topic("inj", 1)
    mock.push_errors(0, 6, 6, 7)        # NOT_LEADER_OR_FOLLOWER x2, REQUEST_TIMED_OUT
    with Producer(bootstrap_servers=mock.bootstrap, retry_backoff_ms=20, **FAST) as p:
        assert p.send("inj", b"x", partition=0).result(10).offset == 0


def test_confluent_reads_what_kcodec_wrote(mock):
    import confluent_kafka

    mock.create_topic("peer", 1)
    with Producer(bootstrap_servers=mock.bootstrap, compression_type="zstd", **FAST) as p:
        for i in range(10):
            p.send("peer", f"m{i}".encode(), partition=0)
    cc = confluent_kafka.Consumer({"bootstrap.servers": mock.bootstrap, "group.id": "peer",
                                   "auto.offset.reset": "earliest"})
    try:
        cc.assign([confluent_kafka.TopicPartition("peer", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            m = cc.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [f"m{i}".encode() for i in range(10)]
    finally:
        cc.close()


# --------------------------------------------------------------------- sans-I/O units
def _answer(conn: Connection, cid: int, body_bytes: bytes) -> list[Response[Any]]:
    payload = cid.to_bytes(4, "big") + body_bytes
    return conn.receive(len(payload).to_bytes(4, "big") + payload)


def test_unsupported_version_body_of_any_shape_retries_at_v0():
    c = Connection("t")
    cid, _ = c.handshake(3)
    # librdkafka's mock: error 35, then bytes that are neither a v0 nor a v3 body
    (resp,) = _answer(c, cid, bytes.fromhex("0023010012000000020000000000"))
    assert resp.version == 3 and resp.body.error_code == 35
    assert not c.on_api_versions(resp)
    assert c.api_versions_retry_version(resp) == 0


def test_unsupported_version_v0_body_names_the_retry_version():
    c = Connection("t")
    cid, _ = c.handshake(3)
    R = RESPONSES[18]
    body = R(error_code=35, api_keys=[R.ApiVersion(api_key=18, min_version=0, max_version=2)])
    frame = encode_response(body, 0, cid, framed=False)
    (resp,) = _answer(c, cid, frame[4:])
    assert not c.on_api_versions(resp)
    assert c.api_versions_retry_version(resp) == 2


def test_brokers_without_apiversions_v3_get_no_flexible_versions():
    R = RESPONSES[18]
    for av_max, join in ((2, 5), (3, 9)):
        c = Connection("t")
        cid, _ = c.request(ApiVersionsRequest(), av_max)
        body = R(error_code=0, api_keys=[R.ApiVersion(api_key=18, min_version=0, max_version=av_max),
                                         R.ApiVersion(api_key=11, min_version=0, max_version=9),
                                         R.ApiVersion(api_key=3, min_version=0, max_version=12)])
        frame = encode_response(body, av_max, cid, framed=False)
        (resp,) = _answer(c, cid, frame[4:])
        assert c.on_api_versions(resp)
        assert c.version(11) == join
        assert c.version(3) == (8 if av_max < 3 else 12)


def test_error_codes_above_127():
    assert ErrorCode(128).name == "INVALID_REGULAR_EXPRESSION"
    assert ErrorCode(129).name == "REBOOTSTRAP_REQUIRED"
    assert ErrorCode(133).name == "SHARE_SESSION_LIMIT_REACHED" and ErrorCode(133).retriable
    assert not ErrorCode(132).retriable
    from kcodec.client.errors import KafkaError

    assert "STREAMS_TOPOLOGY_FENCED (132)" in str(KafkaError(132, "x"))
