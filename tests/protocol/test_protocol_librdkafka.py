"""Frames librdkafka 2.12.1 (confluent-kafka 2.12) sent to ``kcodec broker``, captured on the
wire: both twins decode them (a flexible request's header is v2: int16 client id, then a
tagged-field section). One -- Metadata v12 for every topic, as Quix Streams' admin client
asks it -- carries three bytes after its fields; Apache Kafka ignores them, and so does
kcodec's broker (strict decoding, the default, names them)."""

from __future__ import annotations

import struct
import uuid

import pytest

from kcodec import _impl
from kcodec.errors import CorruptDataError
from kcodec.protocol import (
    FindCoordinatorRequest,
    MetadataRequest,
    RequestHeader,
    decode_request,
)
from kcodec.protocol.framing import request_header_version
from tests.conftest import IMPLS

H = bytes.fromhex
CLIENT = "72646b61666b61"     # "rdkafka"
FRAMES = [
    # Metadata v12, every topic (an empty compact array), as the bootstrap connection asks
    (H("0003000c00000002" "0007" + CLIENT + "00" "01" "00" "00" "00"),
     MetadataRequest(topics=[], allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False)),
    # Metadata v12 for topic "x" (null topic id), auto-creation on
    (H("0003000c00000005" "0007" + CLIENT + "00" "02" + "00" * 16 + "0278" "00" "01" "00" "00"),
     MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="x")],
                     allow_auto_topic_creation=True, include_topic_authorized_operations=False)),
    # FindCoordinator v2 (not flexible: header v1) for group "g"
    (H("000a000200000003" "0007" + CLIENT + "0001" "67" "00"),
     FindCoordinatorRequest(key="g", key_type=0)),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("frame, want", FRAMES, ids=["metadata-all", "metadata-topic", "find-coordinator"])
def test_librdkafka_frames_decode_whole(impl: str, frame: bytes, want) -> None:
    engine = _impl.twin("engine", impl)
    key, version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
    hdr, pos = engine.decode_struct(RequestHeader.plan(request_header_version(key, version)),
                                    frame, 0, False)
    assert hdr.client_id == "rdkafka"
    body, end = engine.decode_struct(type(want).plan(version), frame, pos, True)
    assert end == len(frame)
    assert body == want
    assert decode_request(frame) == (hdr, want)


# every topic (topics null), allow_auto_topic_creation false, include_topic_authorized_
# operations false, no tagged fields -- then 01 00 00, which no field of v12 accounts for
ALL_TOPICS_TRAILING = H("0003000c00000003" "0007" + CLIENT + "00" "00" "00" "00" "00" "010000")


def test_metadata_v12_with_trailing_bytes_strict_and_lenient() -> None:
    with pytest.raises(CorruptDataError, match="3 trailing bytes after MetadataRequest"):
        decode_request(ALL_TOPICS_TRAILING)
    hdr, body = decode_request(ALL_TOPICS_TRAILING, trailing_ok=True)
    assert (hdr.request_api_version, hdr.correlation_id) == (12, 3)
    assert body.topics is None and body.allow_auto_topic_creation is False


def test_kcodec_broker_answers_that_metadata_request() -> None:
    from kcodec.broker import Cluster
    from kcodec.protocol import decode_response
    from tests.support.broker_raw import Raw

    with Cluster(1) as kb, Raw(kb.bootstrap) as raw:
        raw.sock.sendall(struct.pack(">i", len(ALL_TOPICS_TRAILING)) + ALL_TOPICS_TRAILING)
        _hdr, resp = decode_response(raw.recv_frame(), 3, 12, 3)
        assert len(resp.brokers) == 1
