"""The runtime store's chunk codec, kcodec._py.msgcols and its compiled twin
(kcodec.runtime.message's encode_many/decode_many): the same bytes from the same messages,
the same messages back, and the same error (class, text and offset) for every malformed
blob, in both twins."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcodec import _impl
from kcodec.errors import CorruptDataError, TruncatedError
from kcodec.runtime import message
from kcodec.runtime.message import Message
from tests.conftest import IMPLS, NO_EXT

pytestmark = pytest.mark.twins      # the pure-twin pass runs these too

PY = _impl.twin("msgcols", "python")
CY = PY if NO_EXT else _impl.twin("msgcols", "cython")
BOTH = [_impl.twin("msgcols", i) for i in IMPLS]


def outcome(fn: Any, *args: Any) -> Any:
    """What a call gives: its value, or its error's class, text and offset."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:                        # noqa: BLE001 - compared, not hidden
        return (type(exc), str(exc), getattr(exc, "offset", None))


def same_encode(msgs: Any) -> Any:
    got = [outcome(m.encode_many, msgs) for m in BOTH]
    assert all(g == got[0] for g in got), got
    return got[0]


def same_decode(data: Any) -> Any:
    got = [outcome(m.decode_many, data, Message) for m in BOTH]
    assert all(g == got[0] for g in got), got
    if got[0][0] == "ok":
        assert all(type(x) is Message for x in got[0][1])
    return got[0]


def stored(m: Message) -> Message:
    """``m`` as it comes back: attempts clamped to u16, header keys as str, no header list
    for no headers."""
    return m._replace(attempts=min(m.attempts, 0xFFFF),
                      headers=[(k if isinstance(k, str) else bytes(k).decode(), v)
                               for k, v in m.headers or ()])


def generated(rng: random.Random, n: int) -> list[Message]:
    topics = ["orders", "payments", "é-topic", ""][:rng.randint(1, 4)]

    def blob() -> bytes | None:
        r = rng.random()
        return None if r < 0.15 else b"" if r < 0.3 else rng.randbytes(rng.randint(1, 40))

    out = []
    for _ in range(n):
        hdrs = [(rng.choice(["a", "trace-id", "ü", ""]), blob())
                for _ in range(rng.choice([0, 0, 0, 1, 3]))]
        out.append(Message(rng.choice(topics), rng.randint(-2**31, 2**31 - 1),
                           rng.randint(-2**63, 2**63 - 1), rng.randint(-2**63, 2**63 - 1),
                           rng.randint(-128, 127), blob(), blob(), hdrs,
                           rng.choice([0, 1, 0xFFFF, 0x10000, 10**30]),
                           rng.choice([None, None, "", "boom", "ça a échoué", "\ud800 lone"]),
                           rng.choice([0, 0, 1_733_400_000_000, -1])))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_generated_batches_give_the_same_bytes_and_messages(seed: int) -> None:
    rng = random.Random(seed)
    msgs = generated(rng, rng.choice([1, 2, 7, 64, 500]))
    kind, blob = same_encode(msgs)
    assert kind == "ok"
    kind, back = same_decode(blob)
    assert kind == "ok"
    want = [stored(m) for m in msgs]
    want = [w._replace(error=None if w.error is None else
                       w.error.encode("utf-8", "replace").decode()) for w in want]
    assert back == want


def test_the_benchmark_batch_and_the_empty_one() -> None:
    msgs = [Message("orders", i % 12, 10**6 + i, 1_733_400_000_000 + i, 0, b"k" * 16,
                    bytes(100), [], 0, None, 0) for i in range(500)]
    kind, blob = same_encode(msgs)
    assert same_decode(blob) == ("ok", msgs)
    assert len(blob) == 7 + 2 + 6 + 500 * (49 + 116)
    assert same_encode([]) == ("ok", b"\x02\x00\x00\x00\x00\x00\x00")
    assert same_decode(b"\x02\x00\x00\x00\x00\x00\x00") == ("ok", [])


def test_nulls_empties_headers_errors_and_clamped_attempts() -> None:
    msgs = [Message("t", 0, 1, 2, 0, None, None, [], 0, None, 0),
            Message("t", 1, 2, 3, 1, b"", b"", [("a", None), ("b", b""), ("c", b"x")], 1, "", 5),
            Message("u", 2, 3, 4, 0, b"k", b"v", [(b"raw", b"y")], 0x1FFFF, "é", 6),
            Message("t", 3, 4, 5, 0, b"k", None, None, 2**70, None, 0)]
    kind, blob = same_encode(msgs)
    assert kind == "ok"
    kind, back = same_decode(blob)
    assert back == [stored(m) for m in msgs]
    assert back[2].attempts == back[3].attempts == 0xFFFF
    assert back[3].headers == []


def test_sequences_other_than_a_list_of_message_tuples() -> None:
    msgs = generated(random.Random(7), 5)
    want = same_encode(msgs)
    assert same_encode(tuple(msgs)) == want
    assert same_encode([list(m) for m in msgs]) == want
    assert same_encode([(*m, "extra") for m in msgs])[0] is ValueError   # all 12: too many
    assert same_encode(msgs[:2] + [[*msgs[2], "x"]] + msgs[3:]) == want
    kind, blob = want
    assert same_decode(bytearray(blob))[1] == same_decode(memoryview(blob))[1] \
        == same_decode(blob)[1]


@pytest.mark.parametrize("bad", [
    [Message("t", 0, 1, 2, 0, b"k", b"v", [], 0, None, 0)[:10]],      # 10 fields
    [(*Message("t", 0, 1, 2, 0, b"k", b"v", [], 0, None, 0), 1)],     # 12 fields each
    [Message("t", 2**31, 1, 2, 0, b"k", b"v", [], 0, None, 0)],       # partition > i32
    [Message("t", 0, 2**63, 2, 0, b"k", b"v", [], 0, None, 0)],       # offset > i64
    [Message("t", 0, 1, -2**63 - 1, 0, b"k", b"v", [], 0, None, 0)],  # timestamp < i64
    [Message("t", 0, 1, 2, 128, b"k", b"v", [], 0, None, 0)],         # ts type > i8
    [Message("t", 0, 1, 2, 0, b"k", b"v", [], -1, None, 0)],          # attempts < 0
    [Message("t", 0, 1, 2, 0, b"k", b"v", [], 0, None, 2**64)],       # not_before
    [Message("t", 0, 1.5, 2, 0, b"k", b"v", [], 0, None, 0)],         # not an integer
    [Message("t", 0, 1, 2, 0, b"k", b"v", [("k" * 70000, None)], 0, None, 0)],
    [Message("t", 0, 1, 2, 0, b"k", b"v", [("k", b"v")] * 0x10000, 0, None, 0)],
    [Message("t" * 70000, 0, 1, 2, 0, b"k", b"v", [], 0, None, 0)],   # topic > u16
], ids=["10-fields", "12-fields", "partition", "offset", "timestamp", "ts-type", "attempts",
        "not-before", "float", "header-key", "headers", "topic"])
def test_bad_messages_raise_the_same_error(bad: list) -> None:
    kind = same_encode(bad)[0]
    assert kind in (ValueError, struct.error), kind


def test_too_many_topics_raise_the_same_error() -> None:
    msgs = [Message(f"t{i}", 0, i, 0, 0, None, None, [], 0, None, 0) for i in range(0x10000)]
    assert same_encode(msgs)[:2] == (ValueError, "65536 topics in one batch; at most 65535 "
                                                 "can be stored")
    assert same_encode(msgs[:0xFFFF])[0] == "ok"


@pytest.mark.parametrize("field,value", [(5, "str key"), (6, 12), (0, 3), (9, 5)])
def test_a_field_of_the_wrong_type_raises_the_same_class(field: int, value: Any) -> None:
    m = list(Message("t", 0, 1, 2, 0, b"k", b"v", [], 0, None, 0))
    m[field] = value
    got = [outcome(t.encode_many, [tuple(m)]) for t in BOTH]
    assert all(g[0] is got[0][0] and g[0] != "ok" for g in got), got


def small_blob() -> bytes:
    msgs = [Message("t", 0, 1, 2, 0, b"key", b"value", [("h", b"x"), ("n", None)], 1, "bad", 3),
            Message("ü", 1, 2, 3, 1, None, b"", [], 0, None, 0)]
    return PY.encode_many(msgs)


def test_every_truncation_raises_the_same_error() -> None:
    data = small_blob()
    for cut in range(len(data)):
        kind = same_decode(data[:cut])[0]
        assert kind in (TruncatedError, CorruptDataError), (cut, kind)
    assert same_decode(data)[0] == "ok"


def test_every_byte_flipped_gives_the_same_outcome() -> None:
    data = small_blob()
    for i in range(len(data)):
        for x in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            same_decode(data[:i] + bytes([x]) + data[i + 1:])


def _at(data: bytes, pos: int, fmt: str, value: int) -> bytes:
    return data[:pos] + struct.pack(fmt, value) + data[pos + struct.calcsize(fmt):]


def test_corrupt_counts_and_lengths_raise_the_same_error() -> None:
    data = small_blob()
    n = 2
    cols = 7 + 2 + 1 + 2 + 2            # head, "t", "ü" (2 bytes)
    klen, vlen, hlen, elen = (cols + n * off for off in (33, 37, 41, 45))
    cases = {
        "version": (data[:0] + b"\x01" + data[1:], CorruptDataError, "unknown version 1"),
        "count": (_at(data, 1, ">I", 2**32 - 1), TruncatedError, "columns"),
        "topic count": (_at(data, 5, ">H", 0xFFFF), TruncatedError, "topic"),
        "topic length": (_at(data, 7, ">H", 0xFFFF), TruncatedError, "topic"),
        "topic utf-8": (_at(data, 9, ">B", 0xFF), CorruptDataError, "not UTF-8"),
        "topic index": (_at(data, cols, ">H", 2), CorruptDataError, "topic index"),
        "key -2": (_at(data, klen, ">i", -2), CorruptDataError, "impossible key length"),
        "key big": (_at(data, klen, ">i", 2**30), TruncatedError, "keys"),
        "value -5": (_at(data, vlen, ">i", -5), CorruptDataError, "impossible value length"),
        "value big": (_at(data, vlen, ">i", 2**31 - 1), TruncatedError, "values"),
        "headers -2": (_at(data, hlen, ">i", -2), CorruptDataError, "impossible header length"),
        "headers big": (_at(data, hlen, ">i", 10**6), TruncatedError, "stored messages' headers"),
        "error -3": (_at(data, elen, ">i", -3), CorruptDataError, "impossible error length"),
        "error big": (_at(data, elen, ">i", 99), TruncatedError, "errors"),
        "trailing": (data + b"\x00", CorruptDataError, "1 bytes after their end"),
    }
    for name, (bad, cls, text) in cases.items():
        kind, msg, _ = same_decode(bad)
        assert kind is cls and text in msg, (name, kind, msg)


def _with_headers(blob: bytes) -> bytes:
    """One message, no key, no value, no error, the headers blob ``blob``."""
    n = 1
    return (struct.pack(">BIH", 2, n, 1) + struct.pack(">H", 1) + b"t"
            + struct.pack(">HHiqqbq", 0, 0, 0, 0, 0, 0, 0)
            + struct.pack(">iiii", -1, -1, len(blob), -1) + blob)


@pytest.mark.parametrize("blob,cls,text", [
    (b"\x00", TruncatedError, "header count"),
    (b"\x00\x02" + b"\x00\x01a\xff\xff\xff\xff", TruncatedError, "header key"),
    (b"\x00\x01\x00\x05ab", TruncatedError, "header key"),
    (b"\x00\x01\x00\x01a\x00\x00", TruncatedError, "header value"),
    (b"\x00\x01\x00\x01a\x00\x00\x00\x09abc", TruncatedError, "header value"),
    (b"\x00\x01\x00\x01a\xff\xff\xff\xfe", CorruptDataError, "impossible length -2"),
    (b"\x00\x01\x00\x01\xff\xff\xff\xff\xff", CorruptDataError, "not UTF-8"),
    (b"\x00\x01\x00\x01a\xff\xff\xff\xff!", CorruptDataError, "1 bytes after their end"),
    (b"\x00\x00", "ok", None),
    (b"\x00\x01\x00\x00\x00\x00\x00\x00", "ok", None),
])
def test_a_bad_headers_blob_raises_the_same_error(blob: bytes, cls: Any, text: str) -> None:
    got = same_decode(_with_headers(blob))
    assert got[0] == cls, got
    if text:
        assert text in got[1], got


def test_a_headers_error_names_its_offset_in_the_data() -> None:
    data = _with_headers(b"\x00\x01\x00\x01a\xff\xff\xff\xfe")
    kind, msg, offset = same_decode(data)
    assert offset == len(data) - 4


def test_a_message_type_that_is_not_a_tuple_type_raises_the_same_error() -> None:
    blob = small_blob()
    for bad in (dict, 3, None):
        got = [outcome(m.decode_many, blob, bad) for m in BOTH]
        assert got[0][0] is TypeError and all(g == got[0] for g in got), got
    assert same_decode(b"\x02" + bytes(6))[0] == "ok"       # nothing made: no type needed


def test_the_face_gives_messages() -> None:
    msgs = generated(random.Random(3), 20)
    back = message.decode_many(message.encode_many(msgs))
    assert all(type(m) is Message for m in back)
    assert back[0].topic == msgs[0].topic


# -- differential, hypothesis ------------------------------------------------------------

_blobs = st.none() | st.binary(max_size=30)
_messages = st.builds(
    Message, st.sampled_from(["a", "b", "ü", ""]), st.integers(-2**31, 2**31 - 1),
    st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1), st.integers(-128, 127),
    _blobs, _blobs, st.lists(st.tuples(st.text(max_size=5), _blobs), max_size=3),
    st.integers(0, 2**20), st.none() | st.text(max_size=8), st.integers(-2**63, 2**63 - 1))


@given(st.lists(_messages, max_size=20))
def test_random_batches_round_trip_alike(msgs: list[Message]) -> None:
    kind, blob = same_encode(msgs)
    assert kind == "ok"
    assert same_decode(blob) == ("ok", [stored(m) for m in msgs])


@given(st.lists(_messages, min_size=1, max_size=6), st.data())
def test_mutated_blobs_give_the_same_outcome(msgs: list[Message], data: st.DataObject) -> None:
    blob = bytearray(PY.encode_many(msgs))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    same_decode(bytes(blob[:cut]))


# -- from_records: a consumer's records made messages ------------------------------------

def test_from_records_gives_the_same_messages_in_both_twins() -> None:
    from kcodec.records import RecordBatchBuilder, iter_batches
    b = RecordBatchBuilder(base_offset=40, max_size=1 << 20)
    b.append(b"k", b"v", [])
    b.append(None, None, [("h", b"x"), ("h", None)])
    b.append(b"", b"", [("\u00fc", b"")])
    recs = [r for bt in iter_batches(b.build()) for r in bt]
    got = [outcome(m.from_records, "t\u00fc", 7, recs, Message) for m in BOTH]
    assert all(g == got[0] for g in got), got
    msgs = got[0][1]
    assert [type(m) for m in msgs] == [Message] * 3
    assert [(m.topic, m.partition, m.offset, m.key, m.value) for m in msgs] == [
        ("t\u00fc", 7, 40, b"k", b"v"), ("t\u00fc", 7, 41, None, None), ("t\u00fc", 7, 42, b"", b"")]
    assert msgs[1].headers == [("h", b"x"), ("h", None)]
    assert all((m.attempts, m.error, m.not_before) == (0, None, 0) for m in msgs)
    assert all(m.timestamp == r.timestamp and m.timestamp_type == r.timestamp_type
               for m, r in zip(msgs, recs, strict=True))
    # what the store writes of them reads back the same
    assert message.decode_many(message.encode_many(msgs)) == msgs
    assert message.from_records("t", 0, []) == []


def test_from_records_reads_any_record_like_object_and_fails_alike() -> None:
    class Rec:
        def __init__(self, off: int) -> None:
            self.offset, self.timestamp, self.timestamp_type = off, 5, 1
            self.key, self.value, self.headers = b"a", None, []

    class NoKey:
        offset = timestamp = timestamp_type = 0
        value, headers = b"", []

    got = [outcome(m.from_records, "x", 1, (Rec(i) for i in range(3)), Message) for m in BOTH]
    assert got[0][0] == "ok" and all(g == got[0] for g in got), got
    assert [m.offset for m in got[0][1]] == [0, 1, 2]
    got = [outcome(m.from_records, "x", 1, [Rec(0), NoKey()], Message) for m in BOTH]
    assert got[0][0] is AttributeError and all(g[0] == got[0][0] for g in got), got
    for bad in (dict, 3):
        got = [outcome(m.from_records, "x", 1, [Rec(0)], bad) for m in BOTH]
        assert got[0][0] is TypeError and all(g[0] is TypeError for g in got), got
