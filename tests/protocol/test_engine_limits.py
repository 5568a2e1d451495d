"""What a message may cost to decode: a struct carries at most MAX_TAGGED_FIELDS tagged
fields, and with ``limits={ALL_ITEMS: n}`` a message at most n array elements and tagged fields;
both are refused at the count, before anything is decoded, the same by both twins."""

from __future__ import annotations

import pytest

from kcodec import _impl
from kcodec.errors import DecodeLimitError
from kcodec.protocol import REQUESTS
from tests.conftest import IMPLS

TWINS = [_impl.twin("engine", impl) for impl in IMPLS]


def uvar(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def api_versions_body(tags: int) -> bytes:
    """ApiVersions v3: two compact strings, then ``tags`` empty unknown tagged fields."""
    return (uvar(2) + b"a" + uvar(2) + b"b" + uvar(tags)
            + b"".join(uvar(100 + t) + uvar(0) for t in range(tags)))


def describe_groups_body(groups: int) -> bytes:
    """DescribeGroups v5: ``groups`` empty group ids."""
    return uvar(groups + 1) + uvar(1) * groups + b"\0" + uvar(0)


@pytest.mark.parametrize("engine", TWINS, ids=IMPLS)
def test_tagged_fields_per_struct_are_bounded(engine):
    plan = REQUESTS[18].plan(3)
    limit = engine.MAX_TAGGED_FIELDS
    obj, _ = engine.decode_struct(plan, api_versions_body(limit))
    assert len(obj._unknown_tags) == limit
    for count in (limit + 1, 135_179):
        with pytest.raises(DecodeLimitError) as err:
            engine.decode_struct(plan, api_versions_body(count))
        assert str(err.value) == (f"ApiVersionsRequest tagged fields: {count} elements, more "
                                  f"than the limit of {limit} at offset 4")
        assert err.value.limit == limit


@pytest.mark.parametrize("engine", TWINS, ids=IMPLS)
def test_items_per_message_are_bounded(engine):
    plan = REQUESTS[15].plan(5)
    body = describe_groups_body(1000)
    assert len(engine.decode_struct(plan, body)[0].groups) == 1000
    assert len(engine.decode_struct(plan, body, 0, True, {"*": 1000})[0].groups) == 1000
    with pytest.raises(DecodeLimitError) as err:
        engine.decode_struct(plan, body, 0, True, {engine.ALL_ITEMS: 999})
    assert str(err.value) == ("DescribeGroupsRequest.groups (with every array and tagged field "
                              "of the message): 1000 elements, more than the limit of 999 at "
                              "offset 0")
    # tagged fields count against the same budget
    plan = REQUESTS[18].plan(3)
    with pytest.raises(DecodeLimitError):
        engine.decode_struct(plan, api_versions_body(10), 0, True, {"*": 9})
    assert engine.decode_struct(plan, api_versions_body(10), 0, True, {"*": 10})[0] is not None


def test_both_twins_refuse_alike():
    plan = REQUESTS[15].plan(5)
    texts = set()
    for engine in TWINS:
        with pytest.raises(DecodeLimitError) as err:
            engine.decode_struct(plan, describe_groups_body(50), 0, True, {"*": 10})
        texts.add(str(err.value))
    assert len(texts) == 1
