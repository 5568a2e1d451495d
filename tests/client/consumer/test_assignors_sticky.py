"""The eager ``sticky`` assignor (Java's StickyAssignor): its user data in Java's layout
(golden bytes derived by hand from StickyAssignor's schema, and kafka-python's
StickyPartitionAssignor as an independent peer), balance and stickiness."""

from __future__ import annotations

import struct

import pytest

from kcodec.client.consumer.assignors import (
    ASSIGNORS,
    StickyAssignor,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
    get_assignor,
)

# previous_assignment: [ {topic "t", partitions [0, 2]} ], generation 5 -- each field as
# Kafka's Struct types write it: int32 array count, int16 string length, int32 items
GOLDEN_V1 = (b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02"
             + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x05")
GOLDEN_V0 = GOLDEN_V1[:-4]


def test_user_data_golden_bytes():
    assert encode_sticky_user_data({"t": [0, 2]}, 5) == GOLDEN_V1
    assert encode_sticky_user_data({"t": [0, 2]}, None) == GOLDEN_V0
    assert decode_sticky_user_data(GOLDEN_V1) == ({"t": [0, 2]}, 5)
    assert decode_sticky_user_data(GOLDEN_V0) == ({"t": [0, 2]}, -1)   # v0: no generation


@pytest.mark.parametrize("junk", [b"\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x01\x00\x09t",
                                  b"\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff", None, b""])
def test_unreadable_user_data_is_ignored_as_java_does(junk):
    assert decode_sticky_user_data(junk) == ({}, -1)


@pytest.mark.peers
def test_kafka_pythons_prefixed_user_data_is_ignored_as_java_ignores_it():
    """kafka-python 3.0's StickyPartitionAssignor puts an int16 version before its user
    data, which is not Java's layout: Java's StickyAssignor reads neither v1 nor v0 from it
    and ignores it (the member counts as owning nothing), and so does kcodec -- no crash,
    no wrong claim."""
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData

    theirs = bytes(StickyAssignorUserData([("t", [0, 2])], 5).encode())
    assert theirs == b"\x00\x01" + GOLDEN_V1            # the prefix, then Java's layout
    assert decode_sticky_user_data(theirs) == ({}, -1)


def _members(spec: dict) -> dict:
    """member -> Subscription from {member: (topics, previous assignment, generation)}."""
    return {m: Subscription(topics, user_data=encode_sticky_user_data(prev, gen)
                            if prev is not None else None)
            for m, (topics, prev, gen) in spec.items()}


def _flat(result: dict) -> dict:
    return {m: sorted((t, p) for t, ps in a.assigned_partitions.items() for p in ps)
            for m, a in result.items()}


def test_balanced_first_assignment_and_registry():
    assert "sticky" in ASSIGNORS and get_assignor("sticky").rebalance_protocol == "eager"
    out = _flat(StickyAssignor().assign({"t": 5, "u": 2},
                                        _members({m: (["t", "u"], None, -1) for m in "abc"})))
    sizes = sorted(len(v) for v in out.values())
    assert sizes == [2, 2, 3]
    every = sorted(tp for v in out.values() for tp in v)
    assert every == [("t", p) for p in range(5)] + [("u", p) for p in range(2)]


def test_a_new_member_moves_only_what_balance_needs():
    prev = {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4, 5]}}
    out = _flat(StickyAssignor().assign({"t": 6}, _members({
        "a": (["t"], prev["a"], 3), "b": (["t"], prev["b"], 3), "c": (["t"], None, -1)})))
    assert sorted(len(v) for v in out.values()) == [2, 2, 2]
    kept = sum(1 for m in "ab" for tp in out[m] if tp[1] in prev[m]["t"])
    assert kept == 4                        # two move to c, the rest stay


def test_the_higher_generation_wins_a_partition_claimed_twice():
    out = _flat(StickyAssignor().assign({"t": 2}, _members({
        "a": (["t"], {"t": [0]}, 4), "b": (["t"], {"t": [0, 1]}, 3)})))
    assert out["a"] == [("t", 0)] and out["b"] == [("t", 1)]


def test_different_subscriptions_stay_balanced():
    out = _flat(StickyAssignor().assign({"t": 4, "u": 4}, _members({
        "a": (["t", "u"], {"t": [0, 1, 2, 3], "u": [0, 1, 2, 3]}, 2), "b": (["u"], None, -1)})))
    assert len(out["a"]) == 4 and len(out["b"]) == 4
    assert all(t == "u" for t, _ in out["b"])


def test_member_remembers_its_assignment_for_the_next_join():
    a = StickyAssignor()
    assert a.subscription(["t"], {}, -1).user_data is None          # nothing owned yet
    a.on_assignment({"t": [2, 0]}, 9)
    data = a.subscription(["t"], {}, 9).user_data
    assert decode_sticky_user_data(data) == ({"t": [0, 2]}, 9)
    assert struct.unpack(">i", data[-4:]) == (9,)
