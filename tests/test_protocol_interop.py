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
from tests.protocol_strategies import plan_strategy

kp = pytest.importorskip("tests.kafka_python_peer")

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
    assert {n for n, c in CLASSES.items() if c.KIND in ("request", "response", "data")} <= set(kp.PEER)
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
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_kafka_python_interop_many(name: str, version: int, data: st.DataObject) -> None:
    check(name, version, data)
