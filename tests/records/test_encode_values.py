"""``encode_values`` (the records of a batch of bytes values, one key for all: the producer's
``send_values``, what ``kcodec produce`` sends stdin with): the bytes RecordBatchBuilder
writes for the same records, cut where the section would pass ``max_bytes``, the same from
both twins, with the same errors."""

from __future__ import annotations

import random

import pytest

from kcodec.errors import EncodeTypeError

TS = 1_700_000_000_000
HEADER = 61


def _builder_section(twin, values: list[bytes], key: bytes | None) -> bytes:
    b = twin("builder").RecordBatchBuilder()
    for v in values:
        assert b.append(key, v, None, TS) is not None
    return b.build()[HEADER:]


@pytest.mark.parametrize("key", [None, b"", b"user-42", b"k" * 200])
def test_the_builders_bytes(twin, key) -> None:
    rng = random.Random(7)
    values = [rng.randbytes(rng.choice([0, 1, 5, 63, 64, 200, 9000])) for _ in range(300)]
    section, end = twin("builder").encode_values(values, 0, key, 1 << 30)
    assert end == len(values)
    assert section == _builder_section(twin, values, key)
    # from the middle: offset deltas from 0 again
    section, end = twin("builder").encode_values(values, 100, key, 1 << 30)
    assert end == 300 and section == _builder_section(twin, values[100:], key)


def test_cut_at_max_bytes_at_least_one(twin) -> None:
    enc = twin("builder").encode_values
    values = [b"x" * 50] * 100
    whole, _ = enc(values, 0, None, 1 << 20)
    one = len(whole) // 100           # every record the same size here (deltas below 64)
    for room in (1, one - 1, one, one + 1, 10 * one, 10 * one + 5):
        section, end = enc(values, 0, None, room)
        assert end == max(1, room // one) and len(section) == (end - 0) * one, room
        assert len(section) <= room or end == 1
    section, end = enc(values, 97, None, 2 * one)
    assert (end, len(section)) == (99, 2 * one)


def test_twins_agree(pair) -> None:
    cy, py = pair("builder")
    rng = random.Random(11)
    for _ in range(50):
        values = [rng.randbytes(rng.randrange(0, 300)) for _ in range(rng.randrange(1, 400))]
        key = None if rng.random() < 0.5 else rng.randbytes(rng.randrange(0, 30))
        start = rng.randrange(len(values))
        room = rng.randrange(1, 40000)
        assert cy.encode_values(values, start, key, room) == py.encode_values(values, start, key, room)


@pytest.mark.parametrize("values, start, key, err", [
    ([b"a", "b"], 0, None, EncodeTypeError),
    ([b"a", None], 0, None, EncodeTypeError),
    ([b"a"], 0, "k", EncodeTypeError),
    ([b"a"], 1, None, ValueError),
    ([], 0, None, ValueError),
    ([b"a"], -1, None, ValueError),
])
def test_errors(pair, values, start, key, err) -> None:
    cy, py = pair("builder")
    for mod in (cy, py):
        with pytest.raises(err) as info:
            mod.encode_values(values, start, key, 1000)
        assert type(info.value) is err
    with pytest.raises(err) as a:
        cy.encode_values(values, start, key, 1000)
    with pytest.raises(err) as b:
        py.encode_values(values, start, key, 1000)
    assert str(a.value) == str(b.value)
