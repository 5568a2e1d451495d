"""Decode limits: a mapping of array field paths to the most elements those arrays may
hold in one decode. Both twins refuse a count past it with the same DecodeLimitError, at
the count prefix, before the array is made."""

from __future__ import annotations

import uuid

import pytest

from kcodec import _impl
from kcodec.errors import DecodeError, DecodeLimitError
from kcodec.protocol import MetadataResponse as M
from tests.conftest import IMPLS

TWINS = [_impl.twin("engine", impl) for impl in IMPLS]
V = 12


def _answer(topics: int, partitions: int = 0) -> bytes:
    P = M.MetadataResponsePartition
    return M(brokers=[M.MetadataResponseBroker(node_id=1, host="h", port=1)], cluster_id="c",
             controller_id=1,
             topics=[M.MetadataResponseTopic(
                 error_code=0, name=f"t{i}", topic_id=uuid.UUID(int=i + 1),
                 partitions=[P(partition_index=p, leader_id=1, replica_nodes=[1],
                               isr_nodes=[1]) for p in range(partitions)])
                 for i in range(topics)]).encode(V)


@pytest.mark.parametrize("engine", TWINS)
def test_under_the_limits_decodes_as_without(engine) -> None:
    buf = _answer(3, 2)
    plan = M.plan(V)
    got, _ = engine.decode_struct(plan, buf, 0, True, {"MetadataResponse.topics": 3,
                                                       "MetadataResponseTopic.partitions": 6})
    assert got == engine.decode_struct(plan, buf)[0]
    assert len(got.topics) == 3


@pytest.mark.parametrize("engine", TWINS)
def test_a_limit_counts_every_array_of_its_path_in_one_decode(engine) -> None:
    buf = _answer(3, 2)     # 3 topics of 2 partitions: the third topic's array makes 6
    with pytest.raises(DecodeLimitError) as e:
        engine.decode_struct(M.plan(V), buf, 0, True, {"MetadataResponseTopic.partitions": 5})
    err = e.value
    assert (err.what, err.count, err.limit) == ("MetadataResponseTopic.partitions", 6, 5)
    assert isinstance(err, DecodeError) and isinstance(err, ValueError)
    assert str(err).startswith("MetadataResponseTopic.partitions: 6 elements, more than the "
                               "limit of 5")
    # each decode starts with the whole allowance again
    assert engine.decode_struct(M.plan(V), buf, 0, True,
                                {"MetadataResponseTopic.partitions": 6})[0] is not None


def test_both_twins_raise_the_same_error_at_the_count_prefix() -> None:
    buf = _answer(1000)
    seen = set()
    for engine in TWINS:
        with pytest.raises(DecodeLimitError) as e:
            engine.decode_struct(M.plan(V), buf, 0, True, {"MetadataResponse.topics": 10})
        seen.add((str(e.value), e.value.offset, e.value.count))
    assert len(seen) == 1, seen
    (_text, offset, count), = seen
    assert count == 1000
    # the topics' count prefix: after throttle time, brokers, cluster id, controller id
    prefix = 4 + (1 + 4 + 2 + 4 + 1 + 1) + 2 + 4
    assert offset == prefix


@pytest.mark.parametrize("engine", TWINS)
def test_a_million_topics_are_refused_before_they_are_made(engine) -> None:
    import tracemalloc

    T = M.MetadataResponseTopic
    buf = M(topics=[T(error_code=0, name=None, topic_id=uuid.UUID(int=0), partitions=[])]
            * 1_000_000).encode(V)
    assert len(buf) > 25_000_000
    tracemalloc.start()
    try:
        with pytest.raises(DecodeLimitError):
            engine.decode_struct(M.plan(V), buf, 0, True, {"MetadataResponse.topics": 1})
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak / 2**20:.1f} MiB made before the refusal"
