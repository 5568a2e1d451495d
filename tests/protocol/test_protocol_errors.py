"""Bad input in both twins: hostile frames, mutated frames, bad values, bad versions.

Both twins must give the same object or raise the same exception class with the same
message; hostile lengths and counts must fail at once, before any allocation.
"""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcodec import _impl
from kcodec.errors import (
    CorruptDataError,
    DecodeError,
    EncodeError,
    KcodecError,
    TruncatedError,
    UnsupportedVersionError,
)
from kcodec.protocol import (
    CLASSES,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    Struct,
)
from tests.conftest import IMPLS
from tests.support.protocol_strategies import all_versions, plan_strategy

TWINS = [_impl.twin("engine", impl) for impl in IMPLS]
H = bytes.fromhex


def canon(v):
    """A comparable form of a decoded value (views as bytes, NaN as a string)."""
    if isinstance(v, Struct):
        return (type(v).__name__, {k: canon(getattr(v, k)) for k in v._slots})
    if isinstance(v, list):
        return [canon(x) for x in v]
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, memoryview):
        return ("view", bytes(v))
    if isinstance(v, float):
        return repr(v)
    return v


def outcome(twin, plan, buf: bytes):
    t0 = time.perf_counter()
    try:
        obj, end = twin.decode_struct(plan, buf, 0, True)
        result = ("ok", canon(obj), end)
    except KcodecError as exc:
        result = (type(exc).__name__, str(exc))
    assert time.perf_counter() - t0 < 2.0, "decoding took too long"
    return result


def same_everywhere(plan, buf: bytes):
    results = [outcome(t, plan, buf) for t in TWINS]
    assert all(r == results[0] for r in results), results
    return results[0]


# ----------------------------------------------------------------- hostile frames

HOSTILE = [
    # MetadataResponse v0: brokers array count 2**31-1 in a 10-byte frame
    (MetadataResponse, 0, H("7fffffff") + bytes(6), TruncatedError,
     "truncated MetadataResponse.brokers: need 2147483647"),
    # MetadataResponse v9 (flexible): compact count 2**32-2
    (MetadataResponse, 9, H("00000000" "ffffffff0f") + bytes(4), TruncatedError,
     "truncated MetadataResponse.brokers: need"),
    # a string length of 32767 with 2 bytes behind it
    (MetadataResponse, 0, H("00000001" "00000001" "7fff" "6162" "00000000"), TruncatedError,
     "truncated MetadataResponseBroker.host: need 32767 bytes, 6 available at offset 10"),
    # records of 2**31-1 bytes in a FetchResponse v4
    (FetchResponse, 4, H("00000000" "00000001" "0001" "74" "00000001" "00000000" "0000"
                         "0000000000000000" "0000000000000000" "00000000" "7fffffff" "00"),
     TruncatedError, "truncated PartitionData.records: need 2147483647 bytes, 1 available"),
    # tagged-field count 2**32-1 in ApiVersionsResponse v3
    (ApiVersionsResponse, 3, H("0000" "01" "00000000" "ffffffff0f"), TruncatedError,
     "truncated ApiVersionsResponse tagged fields"),
    # a varint of 6 bytes
    (ApiVersionsResponse, 3, H("0000" "ffffffffff7f"), CorruptDataError, "too long"),
    # negative length other than -1
    (MetadataRequest, 1, H("fffffffe"), CorruptDataError, "MetadataRequest.topics: negative length -2"),
    # null where the version does not allow it
    (MetadataRequest, 0, H("ffffffff"), CorruptDataError, "null in a non-nullable field"),
    # trailing bytes
    (MetadataRequest, 1, H("00000000" "00"), CorruptDataError, "1 trailing bytes after MetadataRequest"),
    # invalid UTF-8 in a string
    (MetadataRequest, 1, H("00000001" "0002" "ff00"), CorruptDataError, "invalid UTF-8"),
    # a tagged field whose value is shorter than its size says
    (ApiVersionsResponse, 3, H("0000" "01" "00000000" "01" "01" "09" "0000000000000005" "00"),
     CorruptDataError, "finalized_features_epoch: tagged field of 9 bytes has 1 unread"),
]


@pytest.mark.parametrize(("cls", "version", "buf", "exc", "text"), HOSTILE)
def test_hostile_frames_fail_at_once_in_both_twins(cls, version, buf, exc, text) -> None:
    result = same_everywhere(cls.plan(version), buf)
    assert result[0] == exc.__name__, result
    assert text in result[1]
    with pytest.raises(exc):
        cls.decode(buf, version)


def test_decode_rejects_non_buffers_and_bad_positions() -> None:
    plan = MetadataRequest.plan(1)
    for t in TWINS:
        with pytest.raises(TypeError, match="bytes-like"):
            t.decode_struct(plan, None)
        with pytest.raises(CorruptDataError, match="position 9 outside a buffer of 4 bytes"):
            t.decode_struct(plan, b"\x00" * 4, 9)
        # any buffer-protocol object works
        assert t.decode_struct(plan, memoryview(b"\xff\xff\xff\xff"))[0].topics is None
        assert t.decode_struct(plan, bytearray(b"\x00\x00\x00\x00"), 0, True)[0].topics == []


# ----------------------------------------------------------------- versions


def test_version_outside_the_valid_range() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"MetadataRequest version 14 is not supported \(valid versions 0-13\)"):
        MetadataRequest().encode(14)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest.decode(b"", -1)
    with pytest.raises(UnsupportedVersionError, match=r"valid versions 0-"):
        CLASSES["FetchRequest"]().encode(CLASSES["FetchRequest"].MAX_VERSION + 1)
    CLASSES["FetchRequest"]().encode(3)   # v0-3 come from the 3.x specs (KIP-896 removed them)


def test_field_missing_from_the_version() -> None:
    # non-ignorable with a non-default value: refused
    msg = MetadataResponse(cluster_authorized_operations=7)
    with pytest.raises(UnsupportedVersionError, match="MetadataResponse.cluster_authorized_operations is not supported in version 11"):
        msg.encode(11)
    assert MetadataResponse.decode(msg.encode(10), 10) == msg
    # ignorable: dropped silently
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=uuid.uuid4())])
    assert MetadataRequest.decode(req.encode(9), 9).topics[0].topic_id == uuid.UUID(int=0)
    # non-ignorable at its default: fine
    assert MetadataRequest(include_cluster_authorized_operations=False).encode(11)


# ----------------------------------------------------------------- bad values

BAD_VALUES = [
    (MetadataRequest(allow_auto_topic_creation="yes"), 4, "MetadataRequest.allow_auto_topic_creation: expected bool, got str"),
    (MetadataResponse(throttle_time_ms=1 << 31), 3, "MetadataResponse.throttle_time_ms: value 2147483648 out of range for int32 (-2147483648..2147483647)"),
    (MetadataResponse(throttle_time_ms=1 << 80), 3, "out of range for int32"),
    (MetadataResponse(throttle_time_ms=1.5), 3, "MetadataResponse.throttle_time_ms: expected int, got float"),
    (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(host=None)]), 1, "MetadataResponseBroker.host: None is not allowed"),
    (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(host="x" * 40000)]), 1, "string of 40000 bytes is longer than 32767"),
    (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(host="\ud800")]), 9, "not encodable as UTF-8"),
    (MetadataResponse(brokers=[MetadataRequest.MetadataRequestTopic()]), 1, "MetadataResponseBroker: expected MetadataResponseBroker, got MetadataRequestTopic"),
    (MetadataResponse(brokers=7), 1, "MetadataResponse.brokers: expected a list, got int"),
    (MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(topic_id="x")]), 10, "expected uuid.UUID, got str"),
    (MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(partitions=[MetadataResponse.MetadataResponsePartition(replica_nodes=[1, "2"])])]), 9, "MetadataResponsePartition.replica_nodes: expected int, got str"),
    (ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(partition_data=[ProduceRequest.PartitionProduceData(records="abc")])]), 9, "PartitionProduceData.records: expected a bytes-like object, got str"),
]


@pytest.mark.parametrize(("msg", "version", "text"), BAD_VALUES)
def test_bad_values_raise_the_same_encode_error(msg, version, text) -> None:
    plan = type(msg).plan(version)
    errors = []
    for t in TWINS:
        with pytest.raises(EncodeError) as info:
            t.encode_struct(plan, msg)
        errors.append(str(info.value))
    assert all(e == errors[0] for e in errors)
    assert text in errors[0]


def test_missing_attribute_is_an_encode_error() -> None:
    msg = MetadataRequest()
    del msg.allow_auto_topic_creation
    for t in TWINS:
        with pytest.raises(EncodeError, match="allow_auto_topic_creation: the attribute is missing"):
            t.encode_struct(MetadataRequest.plan(4), msg)


def test_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="MetadataRequest has no field 'topicz'"):
        MetadataRequest(topicz=[])


# ----------------------------------------------------------------- differential fuzzing

CASES = all_versions()


@st.composite
def mutated(draw):
    name, version = draw(st.sampled_from(CASES))
    plan = CLASSES[name].plan(version)
    buf = bytearray(draw(plan_strategy(plan, unknown_tags=True)).encode(version))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        i = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and buf:
            buf[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif kind == "cut":
            del buf[i:]
        elif kind == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del buf[i:i + draw(st.integers(1, 4))]
    return plan, bytes(buf)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=mutated())
def test_mutated_frames_same_result_in_both_twins(case) -> None:
    plan, buf = case
    result = same_everywhere(plan, buf)
    assert result[0] in ("ok", "TruncatedError", "CorruptDataError", "DecodeError")


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=mutated())
def test_mutated_frames_same_result_in_both_twins_many(case) -> None:
    plan, buf = case
    same_everywhere(plan, buf)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(name_version=st.sampled_from(CASES), junk=st.binary(max_size=64))
def test_random_bytes_same_result_in_both_twins(name_version, junk) -> None:
    name, version = name_version
    same_everywhere(CLASSES[name].plan(version), junk)


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(DecodeError, ValueError)


def test_the_members_type_checkers_see_are_the_table() -> None:
    """error_codes.py spells the members out for type checkers (they cannot follow the
    table built at import time); that list must be the table, name for name, code for code."""
    import re
    from pathlib import Path

    import kcodec.protocol.error_codes as ec

    src = Path(ec.__file__).read_text(encoding="utf-8")
    block = src[src.index("    class ErrorCode(_Base):\n"):src.index("\nelse:\n")]
    spelled = [(m[1], int(m[2])) for m in re.finditer(r"^        (\w+) = (-?\d+)$", block, re.M)]
    assert spelled == [(name, code) for code, name, _r, _m, _d in ec._ROWS]
    assert spelled == [(e.name, e.value) for e in ec.ErrorCode]
