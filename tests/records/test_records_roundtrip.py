"""Round trips through both twins: build with kcodec, read with kcodec, byte-identical twins."""

from __future__ import annotations

import pytest

TS = 1_700_000_000_000


def _rows(n: int = 5):
    return [(f"k{i}".encode() if i % 3 else None, b"v" * i,
             [("h", b"x"), ("h", None)] if i % 2 else [], TS + i) for i in range(n)]


def test_v2_round_trip(twin) -> None:
    b = twin("batch")
    bld = twin("builder")
    bb = bld.RecordBatchBuilder(base_offset=100, producer_id=7, producer_epoch=2,
                              base_sequence=9, partition_leader_epoch=4)
    for k, v, h, ts in _rows():
        assert bb.append(k, v, h, ts) is not None
    data = bb.build()
    it = b.iter_batches(data)
    (batch,) = list(it)
    assert it.consumed == len(data) and not it.incomplete
    assert (batch.base_offset, batch.last_offset, batch.record_count, batch.size) == (
        100, 104, 5, len(data))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence,
            batch.partition_leader_epoch) == (7, 2, 9, 4)
    assert batch.first_timestamp == TS and batch.max_timestamp == TS + 4
    assert batch.validate_crc()
    got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in batch]
    assert got == [(100 + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(_rows())]


def test_twins_build_identical_bytes(pair) -> None:
    cy, py = pair("builder")
    outs = []
    for m in (cy, py):
        bb = m.RecordBatchBuilder(is_transactional=True)
        for k, v, h, ts in _rows(20):
            bb.append(k, v, h, ts)
        outs.append(bb.build())
    assert outs[0] == outs[1]
    cyl, pyl = pair("legacy")
    for magic in (0, 1):
        outs = []
        for m in (cyl, pyl):
            mb = m.MessageSetBuilder(magic=magic, base_offset=3)
            for k, v, _, ts in _rows(7):
                mb.append(k, v, ts)
            outs.append(mb.build())
        assert outs[0] == outs[1]


# Key/value sizes on both sides of where a record's length varint grows (64, 8192, 2**20
# bytes of body): the compiled builder writes a record after a guessed length size and moves
# it when the guess is wrong.
_EDGE_SIZES = [None, 0, 1, 20, 39, 40, 41, 63, 64, 100, 8100, 8150, 8166, 8170, 8191, 8192,
               20000, 1048500, 1048546]
_EDGE_HEADERS = [None, [], [("a", b"x")], [("\u00e9", None), (b"k", bytearray(b"q"))],
                 (("t", b"1" * 60),), [("long" * 100, b"z" * 5000)]]


def test_twins_build_identical_bytes_at_length_edges(pair) -> None:
    import random

    cy, py = pair("builder")
    rnd = random.Random(7)
    for _ in range(60):
        builders = [m.RecordBatchBuilder(max_size=1 << 24) for m in (cy, py)]
        for i in range(rnd.randint(1, 5)):
            k, v = rnd.choice(_EDGE_SIZES), rnd.choice(_EDGE_SIZES)
            key = None if k is None else bytes(range(256)) * (k // 256) + bytes(k % 256)
            value = None if v is None else memoryview(b"v" * v) if i % 2 else b"v" * v
            headers = rnd.choice(_EDGE_HEADERS)
            ts = rnd.choice([TS + i, 0, -5, True])
            metas = [bb.append(key, value, headers, ts) for bb in builders]
            got = [(m.offset_delta, m.timestamp, type(m.timestamp), m.size) for m in metas]
            assert got[0] == got[1]
        assert builders[0].build() == builders[1].build()


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_round_trip(twin, magic: int) -> None:
    b, L = twin("batch"), twin("legacy")
    mb = L.MessageSetBuilder(magic=magic, base_offset=10)
    for k, v, _, ts in _rows():
        mb.append(k, v, ts)
    data = mb.build()
    batches = list(b.iter_batches(data))
    assert len(batches) == 5
    recs = [r for bt in batches for r in bt]
    assert [r.offset for r in recs] == list(range(10, 15))
    assert [(r.key, r.value) for r in recs] == [(k, v) for k, v, _, _ in _rows()]
    assert [r.timestamp for r in recs] == ([-1] * 5 if magic == 0 else [TS + i for i in range(5)])


def test_compiled_twins_are_chosen_on_a_plain_import() -> None:
    """The record twins must not import faces while _impl decides (a circular import there
    quietly selects the pure twins)."""
    import subprocess
    import sys

    from tests.conftest import NO_EXT

    if NO_EXT:
        pytest.skip("pure-only run")
    out = subprocess.run(
        [sys.executable, "-c", "import kcodec.records, kcodec; print(kcodec.IMPLEMENTATION,"
         " type(kcodec.records.RecordBatchBuilder()).__module__)"],
        capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cython", "kcodec._cy.builder"]


def test_face_exports() -> None:
    import kcodec.records as R

    assert R.TimestampType.LOG_APPEND_TIME == 1 and R.ControlType.COMMIT == 1
    b = R.RecordBatchBuilder()
    b.append(b"k", b"v", timestamp=1)
    (batch,) = list(R.iter_batches(b.build()))
    assert isinstance(batch, R.RecordBatch)
    (r,) = list(batch)
    assert isinstance(r, R.Record) and not r.is_control
    m = R.MessageSetBuilder()
    m.append(None, b"v", 1)
    (lb,) = list(R.iter_batches(m.build()))
    assert isinstance(lb, R.LegacyBatch)
    assert isinstance(R.iter_batches(b""), R.BatchIterator)
