"""Golden bytes worked out by hand from the specs, for the tricky cases, in both twins."""

from __future__ import annotations

import uuid

import pytest

from kcodec import _impl
from kcodec.errors import EncodeError
from kcodec.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeTopicPartitionsRequest,
    FetchRequest,
    MetadataRequest,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from tests.conftest import IMPLS

H = bytes.fromhex


@pytest.fixture(params=IMPLS)
def proto(request: pytest.FixtureRequest):
    """The engine module of one twin (messages encode through ``enc``/``dec`` below)."""
    return _impl.twin("engine", request.param)


def enc(proto, msg, version: int) -> bytes:
    return proto.encode_struct(type(msg).plan(version), msg)


def dec(proto, cls, buf: bytes, version: int):
    return proto.decode_struct(cls.plan(version), buf, 0, True)[0]


def both(proto, msg, version: int, expected: bytes) -> None:
    assert enc(proto, msg, version) == expected
    assert dec(proto, type(msg), expected, version) == msg


def test_request_header_v2_keeps_int16_client_id_and_adds_tags() -> None:
    # ApiVersions v3 is flexible, so the header is v2: api_key, api_version, correlation id,
    # client id with an int16 length (field-level flexibleVersions "none"), then an empty
    # tagged-field section. Body: two compact strings and the empty tagged section.
    frame = encode_request(
        ApiVersionsRequest(client_software_name="kc", client_software_version="1"), 3, 1, "ab")
    assert frame == H("00000013" "0012" "0003" "00000001" "0002" "6162" "00" "03" "6b63" "02" "31" "00")
    hdr, req = decode_request(frame[4:])
    assert hdr == RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="ab")
    assert req.client_software_name == "kc"


def test_request_header_v1_and_null_client_id() -> None:
    frame = encode_request(ApiVersionsRequest(), 2, 7, None)
    assert frame == H("0000000a" "0012" "0002" "00000007" "ffff")


def test_header_client_id_longer_than_a_varint_byte(proto) -> None:
    hdr = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=0, client_id="x" * 300)
    assert enc(proto, hdr, 2) == H("0003000c00000000012c") + b"x" * 300 + b"\x00"


def test_api_versions_response_v3_header_is_v0_and_tags_absent_when_default(proto) -> None:
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    body = H("0000" "02" "0012" "0000" "0004" "00" "00000000" "00")
    both(proto, resp, 3, body)
    frame = encode_response(resp, 3, 9)
    # the response header of ApiVersions is v0 even in flexible versions: no tag byte
    assert frame == H("00000013" "00000009") + body
    assert decode_response(frame[4:], 18, 3, 9) == (9, resp)


def test_api_versions_response_v3_tagged_fields_present(proto) -> None:
    A = ApiVersionsResponse
    resp = A(
        supported_features=[A.SupportedFeatureKey(name="x", min_version=1, max_version=2)],
        finalized_features_epoch=5,
    )
    body = H(
        "0000" "01" "00000000"
        "02"                                   # two tagged fields, in tag order
        "00" "08" "02" "0278" "0001" "0002" "00"  # tag 0: compact array of one feature
        "01" "08" "0000000000000005"           # tag 1: finalized_features_epoch
    )
    both(proto, resp, 3, body)


def test_tagged_fields_read_in_any_order_and_unknown_tags_survive(proto) -> None:
    body = H("0000" "01" "00000000" "02" "09" "03" "616263" "01" "08" "0000000000000005")
    resp = dec(proto, ApiVersionsResponse, body, 3)
    assert resp.finalized_features_epoch == 5
    assert resp._unknown_tags == {9: b"abc"}
    # written back in tag order: the known tag 1 first, then the unknown tag 9
    assert enc(proto, resp, 3) == H("0000" "01" "00000000" "02" "01" "08" "0000000000000005" "09" "03" "616263")


def test_nullable_compact_array(proto) -> None:
    both(proto, MetadataRequest(topics=None), 12, H("00" "01" "00" "00"))
    both(proto, MetadataRequest(topics=[]), 12, H("01" "01" "00" "00"))
    both(proto, MetadataRequest(topics=None), 1, H("ffffffff"))
    with pytest.raises(EncodeError, match="MetadataRequest.topics: None is not allowed"):
        enc(proto, MetadataRequest(topics=None), 0)


def test_uuid_and_null_compact_string(proto) -> None:
    u = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=u, name=None)],
                          allow_auto_topic_creation=False)
    both(proto, req, 12, H("02" "0123456789abcdef0123456789abcdef" "00" "00" "00" "00" "00"))
    decoded = dec(proto, MetadataRequest, enc(proto, req, 12), 12)
    assert isinstance(decoded.topics[0].topic_id, uuid.UUID)
    assert decoded.topics[0].topic_id == u


def test_nullable_struct(proto) -> None:
    R = DescribeTopicPartitionsRequest
    both(proto, R(topics=[R.TopicRequest(name="t")]), 0, H("02" "0274" "00" "000007d0" "ff" "00"))
    both(proto, R(cursor=R.Cursor(topic_name="t", partition_index=3)), 0,
         H("01" "000007d0" "01" "0274" "00000003" "00" "00"))


def test_tagged_struct_written_only_when_not_default(proto) -> None:
    F = FetchRequest
    req = F(max_wait_ms=100, min_bytes=1)
    base = H("00000064" "00000001" "7fffffff" "00" "00000000" "ffffffff" "01" "01" "01")
    both(proto, req, 15, base + H("00"))
    req.replica_state = F.ReplicaState(replica_id=3, replica_epoch=-1)
    both(proto, req, 15, base + H("01" "01" "0d" "00000003" "ffffffffffffffff" "00"))


def test_records_are_zero_copy_views_of_read_only_input(proto) -> None:
    from kcodec.protocol import ProduceRequest as P

    req = P(acks=-1, timeout_ms=1000, topic_data=[P.TopicProduceData(
        name="t", partition_data=[P.PartitionProduceData(index=0, records=b"batch")])])
    data = enc(proto, req, 9)
    got = dec(proto, P, data, 9).topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview) and got.readonly and got.obj is data
    assert got == b"batch"
    # writable input: a private copy, so reusing the caller's buffer cannot change it
    buf = bytearray(data)
    got = dec(proto, P, buf, 9).topic_data[0].partition_data[0].records
    assert type(got) is bytes and got == b"batch"
    buf[:] = bytes(len(buf))
    assert got == b"batch"
    # plain bytes fields are always copies
    from kcodec.protocol import SaslAuthenticateRequest as S

    assert type(dec(proto, S, enc(proto, S(auth_bytes=b"x"), 1), 1).auth_bytes) is bytes
