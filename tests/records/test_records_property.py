"""Differential property tests: both twins build the same bytes and read the same records,
or raise the same error, on random and mutated batches of every magic and codec."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcodec import _impl
from tests.conftest import NO_EXT
from tests.support.records_util import outcome


def pair(name: str):
    """(compiled, pure) twins of ``name``; (pure, pure) in a pure-only run. Not the fixture:
    hypothesis re-runs a test body many times within one fixture scope."""
    py = _impl.twin(name, "python")
    return (py if NO_EXT else _impl.twin(name, "cython")), py

optional_bytes = st.none() | st.binary(max_size=40)
header = st.tuples(st.text(max_size=6), optional_bytes)
row = st.tuples(optional_bytes, optional_bytes, st.lists(header, max_size=3),
                st.integers(-2**40, 2**42))
spec = st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 4), st.lists(row, max_size=12),
                 st.integers(0, 2**40), st.integers(0, 1))


def build(magic: int, codec: int, rows: list, base: int, ts_type: int) -> bytes:
    """The same batch from both twins (asserting byte identity)."""
    outs = []
    for_each = pair("builder") if magic == 2 else pair("legacy")
    for m in for_each:
        if magic == 2:
            b = m.RecordBatchBuilder(compression=codec, base_offset=base, timestamp_type=ts_type)
            for k, v, h, ts in rows:
                b.append(k, v, h, ts)
        else:
            b = m.MessageSetBuilder(magic=magic, compression=min(codec, 3), base_offset=base,
                                    timestamp_type=ts_type)
            for k, v, _, ts in rows:
                b.append(k, v, ts)
        outs.append(b.build())
    assert outs[0] == outs[1]
    return outs[0]


def blob(specs: list) -> bytes:
    return b"".join(build(*s) for s in specs)


@given(st.lists(spec, min_size=1, max_size=3))
def test_random_blobs_round_trip_in_both_twins(specs: list) -> None:
    data = blob(specs)
    cy, py = pair("batch")
    got = outcome(cy, data)
    assert got == outcome(py, data)
    assert got[-1] == ("end", len(data), False)
    records = [r for entry in got[:-1] for r in entry[-1]]
    want = []
    for magic, codec, rows, base, ts_type in specs:
        if magic != 2 and not codec and not rows:
            continue
        for i, (k, v, h, ts) in enumerate(rows):
            if magic == 0:
                ts = -1
            elif ts_type and (magic == 2 or codec):  # log append time: the max
                ts = max(r[3] for r in rows)
            want.append((base + i, ts, k, v, h if magic == 2 else []))
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in records] == want


mutation = st.tuples(st.sampled_from(["flip", "set", "cut", "insert", "int32"]),
                     st.integers(0, 10**6), st.integers(0, 255))


def mutate(data: bytes, muts: list) -> bytes:
    b = bytearray(data)
    for kind, pos, val in muts:
        if not b:
            break
        p = pos % len(b)
        if kind == "flip":
            b[p] ^= 1 << (val % 8)
        elif kind == "set":
            b[p] = val
        elif kind == "cut":
            del b[p:]
        elif kind == "insert":
            b[p:p] = bytes([val]) * (val % 5 + 1)
        else:
            b[p:p + 4] = (val * 0x01010101 - (val << 24) * (val & 1)).to_bytes(
                4, "big", signed=False)[:4] if val else b"\xff\xff\xff\xff"
    return bytes(b)


@given(st.lists(spec, min_size=1, max_size=2), st.lists(mutation, min_size=1, max_size=4),
       st.booleans())
def test_mutated_blobs_same_outcome_in_both_twins(specs: list, muts: list, validate: bool) -> None:
    data = mutate(blob(specs), muts)
    cy, py = pair("batch")
    assert outcome(cy, data, validate) == outcome(py, data, validate)


@given(st.binary(max_size=300), st.booleans())
def test_random_bytes_same_outcome_in_both_twins(data: bytes, validate: bool) -> None:
    cy, py = pair("batch")
    assert outcome(cy, data, validate) == outcome(py, data, validate)


@pytest.mark.slow
@settings(max_examples=2000)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 4),
                          st.lists(row, max_size=200), st.integers(0, 2**40),
                          st.integers(0, 1)), min_size=1, max_size=4),
       st.lists(mutation, max_size=6), st.booleans())
def test_big_mutated_blobs_same_outcome(specs: list, muts: list, validate: bool) -> None:
    data = mutate(blob(specs), muts)
    cy, py = pair("batch")
    assert outcome(cy, data, validate, limit=1 << 20) == outcome(py, data, validate,
                                                                 limit=1 << 20)
