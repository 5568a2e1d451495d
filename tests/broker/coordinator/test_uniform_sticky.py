"""The consumer protocol's uniform assignor is sticky as Kafka's when members share one
subscription: a member keeps what it had up to its quota, lowest partitions first (what
librdkafka's 0113 x_incremental_rebalances expects of Kafka)."""

from __future__ import annotations

from kcodec.broker.coordinator.consumer_group import uniform_assign


def _parts(a: dict) -> dict:
    return {m: sorted(p for ps in o.values() for p in ps) for m, o in a.items()}


def test_members_joining_one_by_one_keep_their_partitions():
    subs = {"c0": ["t"]}
    one = uniform_assign(subs, {"t": 6})
    assert _parts(one) == {"c0": [0, 1, 2, 3, 4, 5]}
    subs["c1"] = ["t"]
    two = uniform_assign(subs, {"t": 6}, one)
    assert _parts(two) == {"c0": [0, 1, 2], "c1": [3, 4, 5]}
    subs["c2"] = ["t"]
    three = uniform_assign(subs, {"t": 6}, two)
    assert _parts(three) == {"c0": [0, 1], "c1": [3, 4], "c2": [2, 5]}
    del subs["c0"]                  # a member leaves: the others keep theirs and share its
    after = uniform_assign(subs, {"t": 6}, three)
    assert _parts(after) == {"c1": [0, 3, 4], "c2": [1, 2, 5]}


def test_uneven_counts_and_partitions_that_went_away():
    subs = {"a": ["t"], "b": ["t"], "c": ["t"]}
    first = uniform_assign(subs, {"t": 7})
    assert sorted(len(v) for v in _parts(first).values()) == [2, 2, 3]
    assert sorted(p for v in _parts(first).values() for p in v) == list(range(7))
    fewer = uniform_assign(subs, {"t": 4}, first)     # (as after a recreate with 4)
    assert sorted(p for v in _parts(fewer).values() for p in v) == [0, 1, 2, 3]
    assert sorted(len(v) for v in _parts(fewer).values()) == [1, 1, 2]
