"""The client's typed protocol: requests are the generated message classes, encoded for the
negotiated version; an unknown field is an error; error codes by name, the metadata-refresh
set derived from ErrorCode as Java's InvalidMetadataException classes are."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from kcodec.client.config import ClientConfig
from kcodec.client.net import requests
from kcodec.client.net.cluster import REFRESH_CODES, Cluster
from kcodec.client.net.conn import BrokerConnection
from kcodec.client.net.core import Connection
from kcodec.client.net.wire import encode_request
from kcodec.protocol import ErrorCode, MetadataRequest, decode_request
from tests.support.typecheck import mypy


def test_an_unknown_request_field_is_an_error() -> None:
    """A misspelled field used to be dropped without a word, the request going out with its
    default instead."""
    with pytest.raises(TypeError, match="MetadataRequest has no field 'topcs'"):
        MetadataRequest(topcs=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="MetadataRequestTopic has no field 'nme'"):
        MetadataRequest.MetadataRequestTopic(nme="t")  # type: ignore[call-arg]


def test_a_dict_of_fields_is_no_request() -> None:
    """Only request objects go out (the API key is their class's): a dict of field names,
    the old untyped body, is refused at every layer before anything is sent."""
    refused = "a request is a kcodec.protocol request object .*, not dict"
    with pytest.raises(TypeError, match=refused):
        encode_request({"topics": None}, 9, 0, "c")  # type: ignore[arg-type]
    c = Connection("c")
    with pytest.raises(TypeError, match=refused):
        c.request({"topics": None}, 9)  # type: ignore[arg-type]
    assert c.in_flight == 0

    async def main() -> None:
        cl = Cluster(ClientConfig(bootstrap_servers="127.0.0.1:1"))
        with pytest.raises(TypeError, match=refused):   # before any connection is tried
            await cl.request(None, {"topics": None})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=refused):
            await cl.request_unanswered(None, {"acks": 0})  # type: ignore[arg-type]
        bc = BrokerConnection("127.0.0.1", 1, 0, "c", 1.0)   # never connected
        with pytest.raises(TypeError, match=refused):
            await bc.request({"topics": None})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=refused):
            await bc.send({"acks": 0})  # type: ignore[arg-type]
    asyncio.run(main())


def test_a_typed_request_is_written_with_the_fields_of_its_version() -> None:
    """As franz-go's kmsg: the client fills in every field it knows; each version writes its
    own (Produce v13 names topics by id, v12 by name)."""
    tid = uuid.uuid4()
    req = requests.produce(None, -1, 1000, [("t", 0, b"")], {"t": tid})
    v12, v13 = req.for_version(12), req.for_version(13)
    assert (v12.topic_data[0].name, v12.topic_data[0].topic_id) == ("t", uuid.UUID(int=0))
    assert (v13.topic_data[0].name, v13.topic_data[0].topic_id) == ("", tid)
    assert req.topic_data[0].name == "t"                    # the caller's object is untouched
    for version in (12, 13):
        frame = encode_request(req, version, 7, "c")
        _hdr, body = decode_request(frame[4:])
        assert body == req.for_version(version)
    # a field the version lacks, with a value: left out (Metadata v3 has no auto-creation flag)
    old = requests.metadata(["t"], auto_create=False).for_version(3)
    assert old.allow_auto_topic_creation is True and old == MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t")])


def test_the_refresh_set_is_the_invalid_metadata_codes() -> None:
    """The codes that make the client refresh its metadata are those ErrorCode flags
    invalid-metadata: Java's InvalidMetadataException subclasses. The set used to be a
    hand-written {3, 5, 6, 74, 75, 100}; REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR and
    INCONSISTENT_TOPIC_ID are in Java's too, UNKNOWN_LEADER_EPOCH is not (Java's
    UnknownLeaderEpochException is a plain RetriableException: retried, no refresh)."""
    assert REFRESH_CODES == {c for c in ErrorCode if c.invalid_metadata}
    for code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
                 ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE,
                 ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
                 ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID):
        assert code in REFRESH_CODES, code
    assert ErrorCode.UNKNOWN_LEADER_EPOCH not in REFRESH_CODES
    assert ErrorCode.UNKNOWN_LEADER_EPOCH.retriable
    assert all(c.retriable for c in REFRESH_CODES)


@pytest.mark.parametrize("code", [ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
                                  ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.INCONSISTENT_TOPIC_ID,
                                  ErrorCode.UNKNOWN_LEADER_EPOCH,
                                  ErrorCode.NOT_LEADER_OR_FOLLOWER])
def test_a_fetched_partitions_transient_error_is_retried_not_raised(code: ErrorCode) -> None:
    """A Fetch answer naming these errors for a partition is retried (after fresh metadata,
    as Java's fetcher does, for all but UNKNOWN_LEADER_EPOCH); the records come on the
    next fetch. REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, OFFSET_NOT_AVAILABLE and
    INCONSISTENT_TOPIC_ID used to reach the application as a KafkaError from poll."""
    from kcodec.broker import Cluster
    from kcodec.client import Consumer, Producer, TopicPartition
    from kcodec.protocol import FetchResponse

    T, P = FetchResponse.FetchableTopicResponse, FetchResponse.PartitionData
    answered: list[int] = []

    def once(req):
        if answered:
            return None
        answered.append(code)
        return FetchResponse(responses=[
            T(topic=t.topic, topic_id=t.topic_id,
              partitions=[P(partition_index=p.partition, error_code=code, high_watermark=-1)
                          for p in t.partitions])
            for t in req.body.topics])

    with Cluster(1) as b:
        b.create_topic("t")
        with Producer(bootstrap_servers=b.bootstrap) as p:
            p.send("t", b"v", partition=0).result(10)
        b.hook("Fetch", once)
        with Consumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                      retry_backoff_ms=20) as c:
            c.assign([TopicPartition("t", 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:
                got += [r.value for rs in c.poll(0.1).values() for r in rs]
    assert answered == [code] and got == [b"v"]


_TYPED_GOOD = '''\
from kcodec.client.net.cluster import Cluster
from kcodec.client.net.conn import BrokerConnection
from kcodec.client.net.core import Connection, Response
from kcodec.protocol import ApiVersionsResponse, MetadataRequest, MetadataResponse, SaslHandshakeRequest


async def f(cl: Cluster, conn: BrokerConnection) -> None:
    md: MetadataResponse = await cl.request(None, MetadataRequest())
    ports: list[int] = [b.port for b in md.brokers]
    r = await conn.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    mechs: list[str] = r.body.mechanisms
    av: Response[ApiVersionsResponse] = await conn.request(Connection.handshake_request(3), 3)
    keys: list[int] = [k.api_key for k in av.body.api_keys]
    await conn.send(MetadataRequest())
    await cl.request_unanswered(None, MetadataRequest())
'''

_TYPED_BAD = '''\
from kcodec.client.net.cluster import Cluster
from kcodec.client.net.conn import BrokerConnection
from kcodec.client.net.core import Connection
from kcodec.protocol import ApiKey, MetadataRequest, SaslHandshakeRequest


async def f(cl: Cluster, conn: BrokerConnection, c: Connection) -> None:
    md = await cl.request(None, MetadataRequest())
    md.brokerz
    r = await conn.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    x: str = r.body.error_code
    c.request({"topics": None})
    await conn.request(ApiKey.METADATA, MetadataRequest())
'''


@pytest.mark.slow
def test_mypy_types_the_round_trip_at_every_layer(tmp_path: Path) -> None:
    """The answer's type comes from the request object through the cluster, the connection
    and its core: mypy sees a misspelt response field and a wrongly typed read, and refuses
    a dict body and the old form with the API key beside the request."""
    r = mypy(tmp_path, "good.py", _TYPED_GOOD)
    assert r.returncode == 0, r.stdout
    r = mypy(tmp_path, "bad.py", _TYPED_BAD)
    out = r.stdout
    assert r.returncode == 1, out
    assert 'bad.py:9: error: "MetadataResponse" has no attribute "brokerz"' in out, out
    assert 'bad.py:11: error: Incompatible types in assignment (expression has type "int", ' \
           'variable has type "str")' in out, out
    assert 'bad.py:12: error: Argument 1 to "request" of "Connection" has incompatible type ' \
           '"dict[str, None]"' in out, out
    assert 'bad.py:13: error: Argument 1 to "request" of "BrokerConnection" has ' \
           'incompatible type "ApiKey"' in out, out


def test_a_request_filled_for_its_version_is_encoded_without_a_copy(monkeypatch) -> None:
    """A Fetch (or Produce) the client filled for the version it sends at is encoded as it
    is: copying it with ``for_version`` made a new object a struct on every request, which
    cost as much as its encoding. One the encoder refuses still goes, copied."""
    from kcodec.protocol import FetchRequest

    req = requests.fetch(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, read_committed=False,
                         session_id=0, session_epoch=-1, partitions=[("t", 0, 5)],
                         partition_max_bytes=1 << 20)
    copied = encode_request(req, 11, 3, "c")
    copies: list[int] = []
    orig = FetchRequest.for_version

    def counted(self, version):
        copies.append(version)
        return orig(self, version)
    monkeypatch.setattr(FetchRequest, "for_version", counted)
    assert encode_request(req, 11, 3, "c") == copied and copies == []
    monkeypatch.setattr(MetadataRequest, "for_version", counted)
    # Metadata v3 has no auto-creation flag: set to False, the encoder refuses it as it is
    _hdr, body = decode_request(encode_request(requests.metadata(["t"], auto_create=False),
                                               3, 4, "c")[4:])
    assert copies == [3] and body == MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t")])
