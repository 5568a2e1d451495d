"""Fetch answers a failed partition with an empty record set, never a null one, as Kafka does:
librdkafka-based clients reject a whole response whose record set is null (and so never see
the partition's error: an out-of-range offset loops forever, a denied topic is never told)."""

from __future__ import annotations

import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.broker.authorizer import deny
from kcodec.protocol import ErrorCode, FetchRequest
from tests.support.broker_raw import Raw

E = ErrorCode
F = FetchRequest


@pytest.fixture(scope="module")
def kb():
    with Cluster(2, num_partitions=1, authorizer=True, allow_everyone_if_no_acl_found=True) as c:
        c.create_topic("t", 2)
        c.create_topic("denied", 1)
        c.authorizer.add(deny("User:ANONYMOUS", "read", "topic", "denied"))
        yield c


def _parts(raw: Raw, topics: list, version: int = 12, **kw: object) -> list:
    r = raw.call(F(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=topics, **kw), version)
    return [p for t in r.responses for p in t.partitions]


def _want(topic: str, part: int, offset: int = 0, epoch: int = -1, topic_id: object = None) -> object:
    extra = {"topic_id": topic_id} if topic_id is not None else {"topic": topic}
    return F.FetchTopic(partitions=[F.FetchPartition(partition=part, fetch_offset=offset,
                                                     current_leader_epoch=epoch,
                                                     partition_max_bytes=1 << 20)], **extra)


def _leader(c: Cluster, topic: str, part: int) -> int:
    return c.state.partition(topic, part).leader


def _check(p: object, code: int) -> None:
    assert p.error_code == code
    assert p.records is not None and bytes(p.records) == b""


def test_every_partition_error_carries_empty_records(kb):
    leader = _leader(kb, "t", 0)
    other = next(n for n in kb.nodes if n != leader)
    with Raw(kb.nodes[leader].address) as raw:
        (p,) = _parts(raw, [_want("t", 0, offset=99)])
        _check(p, E.OFFSET_OUT_OF_RANGE)
        (p,) = _parts(raw, [_want("nope", 0)])
        _check(p, E.UNKNOWN_TOPIC_OR_PARTITION)
        epoch = kb.state.partition("t", 0).leader_epoch
        (p,) = _parts(raw, [_want("t", 0, epoch=epoch + 5)])
        _check(p, E.UNKNOWN_LEADER_EPOCH)
        (p,) = _parts(raw, [_want("", 0, topic_id=uuid.uuid4())], version=13)
        _check(p, E.UNKNOWN_TOPIC_ID)
    with Raw(kb.nodes[other].address) as raw:
        (p,) = _parts(raw, [_want("t", 0)])
        _check(p, E.NOT_LEADER_OR_FOLLOWER)
    with Raw(kb.nodes[_leader(kb, "denied", 0)].address) as raw:
        (p,) = _parts(raw, [_want("denied", 0)])
        _check(p, E.TOPIC_AUTHORIZATION_FAILED)
