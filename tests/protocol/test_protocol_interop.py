"""Interop with kafka-python 3.x's protocol classes (an independent implementation).

For every message and version both libraries support: kafka-python encodes a random
message to the same bytes as kcodec, kafka-python decodes kcodec's bytes to the same
values, and kcodec decodes kafka-python's bytes to the same object.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcodec.protocol import CLASSES
from kcodec.protocol import _plan as P
from tests.support.protocol_strategies import plan_strategy

kp = pytest.importorskip("tests.support.kafka_python_peer")

CASES = [
    (name, v)
    for name, cls in sorted(CLASSES.items())
    if name in kp.PEER
    for v in range(cls.MIN_VERSION, min(cls.MAX_VERSION, kp.peer_max_version(name)) + 1)
]


def peer_encode(peer_cls, obj, version: int) -> bytes:
    out = bytes(kp.to_peer(peer_cls, obj, version).encode(version=version))
    if peer_cls.type == "data":  # kafka-python prefixes the consumer protocol's version
        assert out[:2] == version.to_bytes(2, "big")
        out = out[2:]
    return out


def peer_decode(peer_cls, data: bytes, version: int):
    if peer_cls.type == "data":
        return peer_cls.decode(io.BytesIO(version.to_bytes(2, "big") + data))
    return peer_cls.decode(data, version=version)


def tagged_structs(plan, seen=None) -> bool:
    """Whether a plan has tagged struct fields (kafka-python writes those even at default)."""
    if any(op[0] == P.STRUCT for op in plan.tagged):
        return True
    return any(op[5] is not None and tagged_structs(op[5]) for op in plan.ops + plan.tagged)


def check(name: str, version: int, data: st.DataObject) -> None:
    cls = CLASSES[name]
    peer_cls = kp.PEER[name]
    plan = cls.plan(version)
    obj = data.draw(plan_strategy(plan), label=name)
    ours = obj.encode(version)
    theirs = peer_encode(peer_cls, obj, version)
    if not tagged_structs(plan):
        assert theirs == ours, "kafka-python encodes different bytes"
    assert cls.decode(theirs, version) == obj
    if name == "ApiVersionsResponse" and obj.error_code != 0:
        return  # kafka-python then reads the body as v0, whatever the version
    assert kp.from_peer(cls, peer_decode(peer_cls, ours, version), version) == cls.decode(ours, version)


def test_peer_covers_every_api_and_the_field_names_agree() -> None:
    ours = {n for n, c in CLASSES.items() if c.KIND in ("request", "response", "data")}
    # kafka-python 3.x has none of the APIs that are new in the latest specs (KIP-848, share
    # and streams groups, telemetry, delegation tokens, the KRaft controller and quorum
    # RPCs): the round-trip tests cover those against the specs alone
    new = {38, 39, 40, 41, 52, 53, 54, 56, 58, 59, 62, 63, 64, 67, 70, 73, *range(68, 94)}
    assert {CLASSES[n].API_KEY for n in ours - set(kp.PEER)} <= new
    diffs = [d for n, c in CLASSES.items() if n in kp.PEER for d in kp.field_names_match(c, kp.PEER[n])]
    assert diffs == []
    assert len(CASES) > 400


@pytest.mark.parametrize(("name", "version"), CASES)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_kafka_python_interop(name: str, version: int, data: st.DataObject) -> None:
    check(name, version, data)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), CASES)
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_kafka_python_interop_many(name: str, version: int, data: st.DataObject) -> None:
    check(name, version, data)


REQUEST_CASES = [(n, v) for n, v in CASES if CLASSES[n].KIND == "request"]
RESPONSE_CASES = [(n, v) for n, v in CASES if CLASSES[n].KIND == "response"]


@pytest.mark.parametrize(("name", "version"), REQUEST_CASES)
def test_request_frames_match_kafka_python(name: str, version: int) -> None:
    """Size prefix + request header (v1 or v2, int16 client id) + body, byte for byte."""
    from kcodec.protocol import decode_request, encode_request

    cls = CLASSES[name]
    msg = cls()
    peer = kp.to_peer(kp.PEER[name], msg, version)
    peer.with_header(correlation_id=1234, client_id="kcodec-interop")
    theirs = bytes(peer.encode(version=version, header=True, framed=True))
    ours = encode_request(msg, version, 1234, "kcodec-interop")
    if not tagged_structs(cls.plan(version)):
        assert ours == theirs
    hdr, req = decode_request(theirs[4:])
    assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id, hdr.client_id) == (
        cls.API_KEY, version, 1234, "kcodec-interop")
    assert req == cls.decode(msg.encode(version), version)


@pytest.mark.parametrize(("name", "version"), RESPONSE_CASES)
def test_response_frames_match_kafka_python(name: str, version: int) -> None:
    """Size prefix + response header (v0, or v1 when flexible; v0 for ApiVersions) + body."""
    from kcodec.protocol import decode_response, encode_response

    cls = CLASSES[name]
    msg = cls()
    peer = kp.to_peer(kp.PEER[name], msg, version)
    peer.with_header(correlation_id=99)
    theirs = bytes(peer.encode(header=True, framed=True))  # the version is set on the object
    ours = encode_response(msg, version, 99)
    if not tagged_structs(cls.plan(version)):
        assert ours == theirs
    assert decode_response(theirs[4:], cls.API_KEY, version, 99) == (99, cls.decode(msg.encode(version), version))
    peer_back = kp.PEER[name].decode(ours, version=version, header=True, framed=True)
    assert peer_back.header.correlation_id == 99
