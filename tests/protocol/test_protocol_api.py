"""The protocol's public helpers: generator check, frames, splitter, versions, error codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kcodec.protocol as kp
from kcodec.errors import ProtocolError, TruncatedError, UnsupportedVersionError
from kcodec.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ErrorCode,
    FrameSplitter,
    MetadataRequest,
    MetadataResponse,
)
from kcodec.protocol.consumer import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_versioned,
    encode_versioned,
)
from tests.support import REPO
from tests.support.reference import latest_specs_dir

ROOT = REPO


def run_generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.gen_protocol", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.reference("specs-latest")
def test_generated_declarations_match_the_specs() -> None:
    r = run_generate("--specs", str(latest_specs_dir()), "--check")
    assert r.returncode == 0, r.stderr
    # the pairs whose request and response copies differ are named, not hidden
    assert "note: ConsumerGroupDescribeRequest is 0-1, ConsumerGroupDescribeResponse 0" \
        in r.stderr


@pytest.mark.reference("specs-latest")
def test_check_names_the_drifted_file(tmp_path: Path) -> None:
    out = tmp_path / "messages"
    specs = str(latest_specs_dir())
    assert run_generate("--specs", specs, "--out", str(out)).returncode == 0
    (out / "metadata.py").write_text((out / "metadata.py").read_text().replace("'0-13'", "'0-12'"))
    (out / "stale.py").write_text("")
    r = run_generate("--specs", specs, "--out", str(out), "--check")
    assert r.returncode == 1
    assert "metadata.py differs" in r.stderr and "stale.py is not generated" in r.stderr


def test_generated_code_has_no_spec_prose() -> None:
    import kcodec.protocol.messages as generated  # the installed package, or the tree

    files = sorted(Path(generated.__file__).parent.glob("*.py"))
    assert len(files) > 50
    text = "".join(p.read_text(encoding="utf-8") for p in files)
    assert "about" not in text and "//" not in text
    assert "Generated — do not edit" in text


def test_api_keys_name_every_request() -> None:
    """ApiKey is generated with the messages: one member per request class, Java's names."""
    from kcodec.protocol import ApiKey
    from tools.gen_protocol.generate import API_KEYS_PATH, committed_decls, render_api_keys

    assert sorted(ApiKey) == sorted(kp.REQUESTS)
    for key, cls in kp.REQUESTS.items():
        assert ApiKey(key).name.replace("_", "") == cls.NAME[: -len("Request")].upper()
    assert (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.API_VERSIONS) == (0, 1, 18)
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT == 68 and ApiKey.SASL_AUTHENTICATE == 36
    assert API_KEYS_PATH.read_text(encoding="utf-8") == render_api_keys(committed_decls()), \
        "kcodec/protocol/api_keys.py drifted; run: python -m tools.gen_protocol --stubs"


def test_from_dict_and_for_version() -> None:
    """to_dict's inverse (a misspelled name is an error), and a copy holding the fields of
    one version: fill every field you know, send at any version."""
    req = MetadataRequest.from_dict({"topics": [{"name": "t"}],
                                     "allow_auto_topic_creation": False})
    assert req.topics[0] == MetadataRequest.MetadataRequestTopic(name="t")
    assert MetadataRequest.from_dict(req.to_dict()) == req
    with pytest.raises(TypeError, match="MetadataRequestTopic has no field 'nme'"):
        MetadataRequest.from_dict({"topics": [{"nme": "t"}]})
    with pytest.raises(UnsupportedVersionError):
        req.encode(3)                          # allow_auto_topic_creation is v4+
    old = req.for_version(3)
    assert old.allow_auto_topic_creation is True and req.allow_auto_topic_creation is False
    assert MetadataRequest.decode(old.encode(3), 3) == old
    assert req.for_version(9) == req and req.for_version(9) is not req


def test_registries_and_names() -> None:
    assert kp.REQUESTS[3] is MetadataRequest and kp.RESPONSES[3] is MetadataResponse
    assert len(kp.REQUESTS) == len(kp.RESPONSES) == 90
    assert MetadataResponse.MetadataResponseBroker().port == 0
    assert MetadataResponse().controller_id == -1  # spec default
    assert (MetadataResponse.MIN_VERSION, MetadataResponse.MAX_VERSION) == (0, 13)
    assert MetadataResponse.is_flexible(9) and not MetadataResponse.is_flexible(8)
    assert [f.name for f in MetadataResponse.MetadataResponseBroker.fields()] == ["node_id", "host", "port", "rack"]
    a, b = MetadataResponse(), MetadataResponse()
    a.topics.append(MetadataResponse.MetadataResponseTopic())
    assert b.topics == []  # no shared mutable defaults


def test_header_versions() -> None:
    assert kp.request_header_version(18, 3) == 2 and kp.request_header_version(18, 2) == 1
    assert kp.response_header_version(18, 3) == 0  # ApiVersions: always v0
    assert kp.response_header_version(3, 9) == 1 and kp.response_header_version(3, 8) == 0


def test_a_spec_header_map_decides_the_header_version(monkeypatch) -> None:
    """Where a spec has a headerVersions map the framing follows it, not the flexible rule
    (Kafka's maps agree with the rule today; a later one need not)."""
    from kcodec.protocol import ListGroupsResponse, ShareAcknowledgeResponse

    assert ListGroupsResponse.HEADER_VERSIONS == ((0, 2, 0), (3, 0x7FFF, 1))
    assert ShareAcknowledgeResponse.HEADER_VERSIONS == ((0, 0x7FFF, 1),)
    assert MetadataRequest.HEADER_VERSIONS == ()           # no map: derived
    monkeypatch.setattr(MetadataResponse, "HEADER_VERSIONS", ((0, 0x7FFF, 0),))
    assert kp.response_header_version(3, 12) == 0
    frame = kp.encode_response(MetadataResponse(), 12, 7)
    # a v0 response header: the correlation id, then straight into the body
    assert frame[4:8] == (7).to_bytes(4, "big")
    assert kp.decode_response(frame[4:], 3, 12, 7) == (7, MetadataResponse())


def test_only_the_versions_request_and_response_both_define_are_negotiated() -> None:
    """The newest copies of a request and its response can differ (PROVENANCE says why):
    kcodec offers no version it could send but not read back."""
    from kcodec.protocol import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

    assert (ConsumerGroupDescribeRequest.MAX_VERSION, ConsumerGroupDescribeResponse.MAX_VERSION) \
        == (1, 0)
    assert kp.supported_versions(69) == (0, 0)
    assert kp.pick_version(69, {69: (0, 1)}) == 0
    assert kp.supported_versions(78) == (1, 2)             # ShareFetch: both 1-2


def test_header_map_errors_name_the_spec() -> None:
    from tools.gen_protocol.generate import check_header_versions, header_versions

    base = {"name": "XRequest", "type": "request", "apiKey": 99, "validVersions": "0-3",
            "flexibleVersions": "2+", "fields": []}
    assert header_versions({**base, "headerVersions": {"0-1": "1", "2+": "2"}}) == \
        {"0-1": 1, "2+": 2}
    with pytest.raises(ValueError, match="XRequest: headerVersions gives no header for version 0"):
        header_versions({**base, "headerVersions": {"1+": "2"}})
    with pytest.raises(ValueError, match="ranges '0-2' and '2\\+' overlap"):
        header_versions({**base, "headerVersions": {"0-2": "1", "2+": "2"}})
    with pytest.raises(ValueError, match="is not a header version number"):
        header_versions({**base, "headerVersions": {"0+": "two"}})
    header = {"name": "RequestHeader", "type": "header", "validVersions": "0-2",
              "flexibleVersions": "2+", "fields": []}
    with pytest.raises(ValueError, match="names RequestHeader v3, but RequestHeader.json "
                                         "defines v0-2"):
        check_header_versions([header, {**base, "headerVersions": {"0+": "3"}}])


def test_frames_round_trip_and_correlation_check() -> None:
    frame = kp.encode_request(MetadataRequest(topics=None), 12, 42, "me")
    hdr, req = kp.decode_request(frame[4:])
    assert (hdr.correlation_id, hdr.client_id, req.topics) == (42, "me", None)
    resp = MetadataResponse(controller_id=1)
    out = kp.encode_response(resp, 12, 42)
    assert kp.decode_response(out[4:], 3, 12, 42) == (42, resp)
    with pytest.raises(ProtocolError, match="correlation id mismatch: expected 7, got 42"):
        kp.decode_response(out[4:], 3, 12, 7)
    with pytest.raises(TruncatedError):
        kp.decode_request(b"\x00")


def test_api_versions_response_falls_back_to_v0() -> None:
    # a broker that does not know the requested version answers with a v0 body
    v0 = ApiVersionsResponse(error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, max_version=2)])
    frame = kp.encode_response(v0, 0, 1)
    assert kp.decode_response(frame[4:], 18, 3, 1) == (1, v0)


def test_frame_splitter() -> None:
    frames = [kp.encode_request(MetadataRequest(), v, v, "c") for v in (1, 9, 12)]
    stream = b"".join(frames)
    s = FrameSplitter()
    got = []
    for i in range(0, len(stream), 5):
        got += s.feed(stream[i:i + 5])
    assert got == [f[4:] for f in frames] and s.pending == 0
    assert FrameSplitter().feed(stream[:-1]) == [f[4:] for f in frames[:2]]
    with pytest.raises(ProtocolError, match="frame size 2147483647 outside 0..1000"):
        FrameSplitter(max_frame_size=1000).feed(b"\x7f\xff\xff\xff")
    with pytest.raises(ProtocolError, match="frame size -1"):
        FrameSplitter().feed(b"\xff\xff\xff\xff")


def test_version_negotiation() -> None:
    A = ApiVersionsResponse
    broker = A(api_keys=[A.ApiVersion(api_key=3, min_version=0, max_version=99),
                         A.ApiVersion(api_key=1, min_version=0, max_version=3),
                         A.ApiVersion(api_key=2, min_version=90, max_version=99),
                         A.ApiVersion(api_key=18, min_version=0, max_version=3)])
    assert kp.pick_version(3, broker) == 13
    assert kp.pick_version(3, broker, max_version=9) == 9
    assert kp.pick_version(18, broker) == 3
    assert kp.pick_version(1, broker) == 3  # Fetch v0-3 are declared (from the 3.x specs)
    with pytest.raises(UnsupportedVersionError, match="no common version of ListOffsetsRequest"):
        kp.pick_version(2, broker)
    with pytest.raises(UnsupportedVersionError, match="does not support ProduceRequest"):
        kp.pick_version(0, broker)
    assert kp.negotiate(broker) == {1: 3, 3: 13, 18: 3}
    # unstable latest versions are left out unless asked for
    lo, hi = kp.supported_versions(2)
    assert hi == kp.REQUESTS[2].MAX_VERSION - (1 if kp.REQUESTS[2].LATEST_UNSTABLE else 0)


def test_error_codes() -> None:
    assert ErrorCode(0) is ErrorCode.NONE and ErrorCode.NONE.ok
    assert ErrorCode(3).name == "UNKNOWN_TOPIC_OR_PARTITION" and ErrorCode(3).retriable
    assert ErrorCode(3).invalid_metadata
    assert not ErrorCode.TOPIC_AUTHORIZATION_FAILED.retriable
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.of(-1) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.of(31337) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert all(e.description for e in ErrorCode)
    with pytest.raises(ValueError):
        ErrorCode(31337)


def test_consumer_protocol_versioned() -> None:
    sub = ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"u")
    data = encode_versioned(sub, 1)
    assert data[:2] == b"\x00\x01"
    assert decode_versioned(ConsumerProtocolSubscription, data) == (1, sub)
    # a newer version is read as the newest known, ignoring extra trailing fields
    newer = b"\x00\x63" + sub.encode(ConsumerProtocolSubscription.MAX_VERSION) + b"future"
    v, got = decode_versioned(ConsumerProtocolSubscription, newer)
    assert v == 99 and got.topics == ["a", "b"]
    asg = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="a", partitions=[0, 1])])
    assert decode_versioned(ConsumerProtocolAssignment, encode_versioned(asg, 0)) == (0, asg)


def test_api_versions_request_v4_matches_v3_layout() -> None:
    assert ApiVersionsRequest(client_software_name="a").encode(4) == ApiVersionsRequest(
        client_software_name="a").encode(3)


def test_a_records_field_that_cannot_be_null_defaults_to_empty() -> None:
    """ShareFetch's records were nullable only in v0, which Kafka removed; FetchSnapshot's
    never: left at their default they encode (as empty), where Fetch's stay null."""
    from kcodec.protocol import FetchResponse, FetchSnapshotResponse, ShareFetchResponse

    T = ShareFetchResponse.ShareFetchableTopicResponse
    msg = ShareFetchResponse(responses=[T(partitions=[ShareFetchResponse.PartitionData()])])
    assert msg.responses[0].partitions[0].records == b""
    assert ShareFetchResponse.decode(msg.encode(1), 1).responses[0].partitions[0].records == b""
    S = FetchSnapshotResponse
    snap = S(topics=[S.TopicSnapshot(partitions=[S.PartitionSnapshot()])])
    assert snap.topics[0].partitions[0].unaligned_records == b""
    assert S.decode(snap.encode(1), 1) == snap
    assert FetchResponse.PartitionData().records is None
