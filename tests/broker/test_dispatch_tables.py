"""What every request asks of the broker's tables: its API's version range, and the error
codes its answer carries (the ErrorsPerSec metric)."""

from __future__ import annotations

from types import SimpleNamespace

from kcodec.broker.apis import VERSIONS, advertised_versions, version_range
from kcodec.broker.metrics import error_codes
from kcodec.protocol import CreateTopicsResponse, ProduceResponse

P = ProduceResponse


def _node(caps: dict[int, int]) -> SimpleNamespace:
    return SimpleNamespace(cluster=SimpleNamespace(version_caps=caps))


def test_version_range_is_the_advertised_table_entry():
    some = sorted(VERSIONS)[:6]
    lo0, hi0 = VERSIONS[some[0]]
    caps = {some[0]: hi0 - 1 if hi0 > lo0 else hi0, some[1]: VERSIONS[some[1]][0] - 1,
            some[2]: 10_000, some[3]: VERSIONS[some[3]][0]}
    for c in ({}, caps):
        node = _node(c)
        table = advertised_versions(node)
        for key in list(VERSIONS) + [9_999, -1]:
            assert version_range(node, key) == table.get(key), (key, c)
    assert version_range(_node(caps), some[1]) is None       # capped below its minimum


def _partition(index: int, code: int, record_errors: int = 0) -> object:
    return P.PartitionProduceResponse(index=index, error_code=code, base_offset=-1,
                                      record_errors=[P.BatchIndexAndErrorMessage(batch_index=i)
                                                     for i in range(record_errors)])


def test_error_codes_counts_every_nested_code():
    answer = P(responses=[
        P.TopicProduceResponse(name="a", partition_responses=[
            _partition(0, 0), _partition(1, 87, record_errors=2), _partition(2, 6)]),
        P.TopicProduceResponse(name="b", partition_responses=[_partition(0, 6), _partition(1, 0)]),
    ])
    assert error_codes(answer) == {87: 1, 6: 2}
    assert error_codes(P(responses=[])) == {}
    top = CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(
        name="t", error_code=36)])
    assert error_codes(top) == {36: 1}


def test_error_codes_of_an_object_that_is_not_a_message():
    class Leaf:
        __slots__ = ("error_code",)

        def __init__(self, code: int) -> None:
            self.error_code = code

    class Body:
        __slots__ = ("error_code", "items")

        def __init__(self) -> None:
            self.error_code = 3
            self.items = [Leaf(5), Leaf(0), Leaf(5)]

    assert error_codes(Body()) == {3: 1, 5: 2}
