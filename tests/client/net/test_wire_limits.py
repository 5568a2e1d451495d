"""What one answer may describe is bounded by its request (kcodec/client/net/wire.py's
``response_limits``): a hostile Metadata answer of a million empty topics (26 MB, under the
100 MB receive cap) decoded to 229 MiB before, and took a client from 33 to 311 MiB; now
its count prefix is refused before anything of it is made."""

from __future__ import annotations

import asyncio
import tracemalloc
import uuid
from typing import Any

import pytest

from kcodec.client.config import ClientConfig
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.net.core import Connection
from kcodec.client.net.wire import METADATA_MAX_TOPICS, response_limits
from kcodec.errors import DecodeLimitError, ProtocolError
from kcodec.protocol import ApiVersionsResponse, FetchRequest, MetadataResponse, encode_response
from tests.support.fake_kafka import FakeKafka

M = MetadataResponse


def _connected() -> Connection:
    c = Connection("me")
    cid, _ = c.handshake()
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=12)
            for k in (0, 1, 2, 3, 18)]
    c.on_api_versions(c.receive(encode_response(
        ApiVersionsResponse(error_code=0, api_keys=keys), 3, cid))[0])
    return c


def _empty_topics(n: int, cid: int) -> bytes:
    T = M.MetadataResponseTopic
    return encode_response(M(topics=[T(error_code=0, name=None, topic_id=uuid.UUID(int=0),
                                       partitions=[])] * n), 12, cid)


def test_a_million_topics_for_one_asked_is_refused_at_its_count() -> None:
    c = _connected()
    cid, _ = c.request(requests.metadata(["t"], False))
    frame = _empty_topics(1_000_000, cid)
    assert len(frame) > 26_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError) as e:
            c.receive(frame)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = str(e.value)
    assert "MetadataResponse.topics: 1000000 elements, more than the limit of 1" in text, text
    assert isinstance(e.value.__cause__, DecodeLimitError)
    # the frame is held once while it is read (the receive cap bounds that); nothing of the
    # decoded form was made: before, the decode alone took 229 MiB
    assert peak < len(frame) + (8 << 20), f"peak {peak / 2**20:.0f} MiB"


def test_every_topic_asked_for_has_its_own_limit() -> None:
    assert response_limits(requests.metadata(None, False))[
        "MetadataResponse.topics"] == METADATA_MAX_TOPICS
    assert response_limits(requests.metadata(["a", "b"], False))[
        "MetadataResponse.topics"] == 2
    # none named is every topic at v0 (the client asks so to learn the brokers)
    assert response_limits(requests.metadata([], False))[
        "MetadataResponse.topics"] == METADATA_MAX_TOPICS
    assert response_limits(FetchRequest()) is None
    c = _connected()
    cid, _ = c.request(requests.metadata(None, False))
    with pytest.raises(ProtocolError, match="more than the limit of 250000"):
        c.receive(_empty_topics(METADATA_MAX_TOPICS + 1, cid))
    c = _connected()
    cid, _ = c.request(requests.metadata(None, False))
    (got,) = c.receive(_empty_topics(1000, cid))
    assert len(got.body.topics) == 1000


def test_topics_not_asked_for_are_not_filed() -> None:
    async def main() -> Any:
        fake = await FakeKafka(nodes=1, topics={"t": {0: 0}, "other": {0: 0}}).start()
        answer = fake._answer

        def more(node: int, header: Any, body: Any) -> Any:
            msg = answer(node, header, body)
            if header.request_api_key == 3 and body.topics is not None:
                # a broken broker: asked for "t", it answers of "other"
                msg.topics = [t for t in answer(node, header, type(body)(topics=None)).topics
                              if t.name == "other"]
            return msg
        fake._answer = more
        try:
            cl = Cluster(ClientConfig(bootstrap_servers=fake.bootstrap))
            body = await cl.refresh(["t"])
            assert [t.name for t in body.topics] == ["other"]
            assert set(cl.topics) == set()
            await cl.close()
        finally:
            await fake.kill()
    asyncio.run(main())
