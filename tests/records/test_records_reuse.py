"""The compiled record iterator decodes into records (and their headers, bytes and strs) that
nobody holds any more. Whatever a consumer keeps - a record, its key, value, headers list, a
header pair, key or value - must keep its value, hash and identity of contents; what it
drops may be reused. Checked against the pure twin, which never reuses anything."""

from __future__ import annotations

import gc
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcodec import _impl
from tests.conftest import NO_EXT


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """gc.collect() here must find the cycles these tests make; scanning everything the
    test run holds by then (thousands of tests' objects) made one property test take 80 s.
    Objects alive before the module are moved out of the collector's sight meanwhile."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def _pair():
    """(compiled, pure) twins; (pure, pure) in a pure-only run (not the fixture: hypothesis
    runs a test body many times within one fixture scope)."""
    py = _impl.twin("batch", "python")
    return (py if NO_EXT else _impl.twin("batch", "cython")), py

KEEP = ["nothing", "record", "key", "value", "headers", "pair", "hkey", "hvalue", "interned",
        "hashes", "append", "offset", "timestamp"]
# Offsets and timestamps of one, two and three 30-bit digits (ints are rewritten in place
# only when nobody else holds them and the digit count and sign match).
BASES = st.sampled_from([0, 1000, 2**31, 2**61 - 5])
TIMESTAMPS = st.sampled_from([1_700_000_000_000, -(2**40), 2**60 + 3, 5])

blob = st.one_of(st.none(), st.sampled_from([b"", b"x", b"ab", b"abcd", b"wxyz"]),
                 st.binary(min_size=0, max_size=12))
hkey = st.one_of(st.sampled_from(["", "k", "ab", "abcd", "wxyz", "é1", "ключ"]),
                 st.text(max_size=6))
header = st.tuples(hkey, blob)
row = st.tuples(blob, blob, st.lists(header, max_size=3))


def _build(rows, base=0, ts=1_700_000_000_000):
    b = _impl.twin("builder", "python").RecordBatchBuilder(base_offset=base)
    for i, (k, v, hs) in enumerate(rows):
        b.append(k, v, hs, timestamp=ts + (i if i % 3 else -i))
    return b.build()


def _fields(r):
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
            [tuple(h) for h in r.headers], r.attributes)


def _consume(mod, data, policy):
    """Iterate like a consumer, keeping what ``policy[i]`` says of record i."""
    kept, seen = [], []
    for batch in mod.iter_batches(data):
        for i, r in enumerate(batch):
            what = policy[i % len(policy)]
            seen.append(_fields(r))
            if what == "record":
                kept.append(r)
            elif what == "key":
                kept.append(r.key)
            elif what == "value":
                kept.append(r.value)
            elif what == "headers":
                kept.append(r.headers)
            elif what == "pair" and r.headers:
                kept.append(r.headers[0])
            elif what == "hkey" and r.headers:
                kept.append(r.headers[-1][0])
            elif what == "hvalue" and r.headers:
                kept.append(r.headers[-1][1])
            elif what == "interned" and r.headers:
                kept.append(sys.intern(r.headers[0][0]))
            elif what == "hashes":
                # Caches each object's hash: a reused object must not keep a stale one.
                kept.append((hash(r.key), hash(r.value),
                             [(hash(k), hash(v)) for k, v in r.headers]))
            elif what == "offset":
                kept.append(r.offset)
            elif what == "timestamp":
                kept.append(r.timestamp)
            elif what == "append":
                r.headers.append(("extra", b"!"))
                seen[-1] = _fields(r)
    return kept, seen


def _snapshot(kept):
    out = []
    for k in kept:
        if hasattr(k, "headers"):
            out.append(_fields(k))
        elif isinstance(k, list):
            out.append([tuple(h) for h in k])
        else:
            out.append(k)
    return out


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=12),
       policy=st.lists(st.sampled_from(KEEP), min_size=1, max_size=6), base=BASES,
       ts=TIMESTAMPS)
def test_kept_objects_keep_their_values(rows, policy, base, ts) -> None:
    cy, py = _pair()
    data = _build(rows, base, ts)
    kept_c, seen_c = _consume(cy, data, policy)
    kept_p, seen_p = _consume(py, data, policy)
    assert seen_c == seen_p
    gc.collect()
    assert _snapshot(kept_c) == _snapshot(kept_p)
    # Hashes cached by the kept objects are those of equal fresh objects.
    for a in kept_c:
        if isinstance(a, bytes):
            assert hash(a) == hash(bytes(bytearray(a)))
        elif isinstance(a, str):
            assert hash(a) == hash(a.encode("utf-8", "surrogatepass").decode("utf-8",
                                                                              "surrogatepass"))


def test_reused_objects_get_fresh_hashes(pair) -> None:
    cy, py = pair("batch")
    rows = [(b"key-%04d" % i, b"value-%04d" % i, [(f"h{i:03d}", b"v-%04d" % i)])
            for i in range(50)]
    data = _build(rows)
    for batch in cy.iter_batches(data):
        for i, r in enumerate(batch):
            k, v, (hk, hv) = r.key, r.value, r.headers[0]
            assert hash(k) == hash(b"key-%04d" % i)
            assert hash(v) == hash(b"value-%04d" % i)
            assert hash(hk) == hash(f"h{i:03d}")
            assert hash(hv) == hash(b"v-%04d" % i)
            assert {hk: 1}.get(f"h{i:03d}") == 1
            del k, v, hk, hv


def test_the_iterator_lets_go_of_its_last_records(pair) -> None:
    """Nothing leaks: decoding the same batch many times does not grow the heap (200
    records of 9 objects each: a leak would be thousands of blocks per round)."""
    cy, py = pair("batch")
    data = _build([(b"k" * 16, b"v" * 100, [("abcd", b"123456"), ("efgh", None)])] * 200)

    def run():
        for batch in cy.iter_batches(data):
            for r in batch:
                r.headers  # noqa: B018

    run()
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(50):
        run()
    gc.collect()
    assert sys.getallocatedblocks() - before < 500
