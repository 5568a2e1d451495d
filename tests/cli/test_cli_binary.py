"""The command line is binary safe: what ``produce`` reads (lines, arguments, keys, header
values) goes into the topic as the bytes it is, and ``consume`` gives the same bytes back;
an input line too long, a record the broker refuses, a signal before any input: each stop
says what was delivered and where to resume."""

from __future__ import annotations

import base64
import io
import json
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from kcodec.cli._client import UsageError
from kcodec.cli._io import CHUNK, TooLong, parse_delimiter, read_records, split_key
from kcodec.client import Consumer, TopicPartition
from tests.cli.harness import create, finish, kcodec, run, run_bytes

# lines as a user may pipe them: not UTF-8, NULs, an empty line, a backslash, a CR
LINES = [b"ok1", b"caf\xe9", b"nul\x00byte", b"", b"\xff\xfe\\x", b"cr\r", b"last"]


def _records(bootstrap: str, topic: str, partition: int = 0) -> list:
    """Every record of one partition, read back with the client."""
    out: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(topic, partition)])
        idle = time.monotonic()
        while time.monotonic() - idle < 1.5:
            got = c.poll(0.2)
            for recs in got.values():
                out += recs
                idle = time.monotonic()
    return out


# ------------------------------------------------------------------ produce: bytes as given

def test_lines_that_are_not_utf8_are_produced_exactly(either, topic_name) -> None:
    """printf 'caf\\xe9\\n' | kcodec produce: it exited 2 with a surrogate error, and the
    lines before the bad one were not delivered."""
    create(either, topic_name, 1)
    rc, out, err, _ = run_bytes("produce", "-b", either.bootstrap, "-t", topic_name,
                                stdin=b"\n".join(LINES))       # the last line has no newline
    assert rc == 0, err
    assert out.count(b"\n") == len(LINES)
    assert [r.value for r in _records(either.bootstrap, topic_name)] == LINES
    # consume gives the same bytes back, one per line (raw output, stdout's binary buffer)
    rc, out, err, _ = run_bytes("consume", "-b", either.bootstrap, "-t", topic_name,
                                "-o", "beginning", "-e")
    assert rc == 0, err
    assert out == b"\n".join(LINES) + b"\n"


def test_arguments_keys_and_header_values_are_bytes(either, topic_name) -> None:
    create(either, topic_name, 1)
    rc, _, err, _ = run_bytes("produce", "-b", either.bootstrap, "-t", topic_name,
                              "-k", b"k\xff\x01", "-H", b"h=v\xfe\x7f", "-H", "n=", b"m\xe9", "")
    assert rc == 0, err
    recs = _records(either.bootstrap, topic_name)
    assert [(r.key, r.value, r.headers) for r in recs] == [
        (b"k\xff\x01", b"m\xe9", [("h", b"v\xfe\x7f"), ("n", b"")]),
        (b"k\xff\x01", b"", [("h", b"v\xfe\x7f"), ("n", b"")])]


def test_a_header_key_that_is_not_utf8_is_a_usage_error() -> None:
    rc, out, err, _ = run_bytes("produce", "-t", "x", "-H", b"k\xe9=v", "m")
    assert (rc, out) == (2, b"")
    assert err.strip() == ("kcodec produce: error: header key k\\xe9 is not UTF-8: Kafka header "
                           "keys are text (their values may be any bytes)")


def test_keys_from_each_line_with_a_delimiter(kbroker, topic_name) -> None:
    """kcat's -K: the key ends at the first delimiter; a line without one has -k's key."""
    create(kbroker, topic_name, 1)
    stdin = b"k1:v1\nno key here\n:empty key\nk\xff:v:with:colons\n"
    rc, _, err, _ = run_bytes("produce", "-b", kbroker.bootstrap, "-t", topic_name, "-K", ":",
                              "-k", "dflt", stdin=stdin)
    assert rc == 0, err
    recs = _records(kbroker.bootstrap, topic_name)
    assert [(r.key, r.value) for r in recs] == [
        (b"k1", b"v1"), (b"dflt", b"no key here"), (b"", b"empty key"), (b"k\xff", b"v:with:colons")]
    rc, out, err, _ = run_bytes("consume", "-b", kbroker.bootstrap, "-t", topic_name,
                                "-o", "beginning", "-e", "-K", "\\t")
    assert rc == 0, err
    assert out == b"k1\tv1\ndflt\tno key here\n\tempty key\nk\xff\tv:with:colons\n"


def test_another_delimiter_carries_values_with_newlines(kbroker, topic_name) -> None:
    create(kbroker, topic_name, 1)
    values = [b"two\nlines", b"", b"three\n\nlines\n"]
    rc, _, err, _ = run_bytes("produce", "-b", kbroker.bootstrap, "-t", topic_name, "-D", "\\x00",
                              stdin=b"\x00".join(values) + b"\x00")
    assert rc == 0, err
    assert [r.value for r in _records(kbroker.bootstrap, topic_name)] == values
    rc, out, err, _ = run_bytes("consume", "-b", kbroker.bootstrap, "-t", topic_name,
                                "-o", "beginning", "-e", "-D", "\\0")
    assert rc == 0 and out == b"\x00".join(values) + b"\x00", err


def test_consume_json_says_how_bytes_are_encoded(kbroker, topic_name) -> None:
    create(kbroker, topic_name, 1)
    rc, _, err, _ = run_bytes("produce", "-b", kbroker.bootstrap, "-t", topic_name, "-K", ":",
                              "-H", b"h=\xff", stdin=b"k:text\n\xff:\xfe\x00\n")
    assert rc == 0, err
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name, "-o",
                          "beginning", "-e", "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    b64 = lambda b: base64.b64encode(b).decode()   # noqa: E731
    assert [(r["key"], r["value"], r["headers"]) for r in rows] == [
        ("k", "text", [["h", {"base64": b64(b"\xff")}]]),
        ({"base64": b64(b"\xff")}, {"base64": b64(b"\xfe\x00")}, [["h", {"base64": b64(b"\xff")}]])]
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name, "-o",
                          "beginning", "-e", "--json", "--base64")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [(r["key"], r["value"], r["headers"]) for r in rows] == [
        (b64(b"k"), b64(b"text"), [["h", b64(b"\xff")]]),
        (b64(b"\xff"), b64(b"\xfe\x00"), [["h", b64(b"\xff")]])]


# ------------------------------------------------------------------ every stop says where to resume

def test_a_line_over_the_limit_stops_with_the_resume_line(kbroker, topic_name) -> None:
    create(kbroker, topic_name, 1)
    stdin = b"a\nb\nc\n" + b"x" * 1000 + b"\nafter\n"
    rc, out, err, _ = run_bytes("produce", "-b", kbroker.bootstrap, "-t", topic_name,
                                "--max-line-bytes", "100", stdin=stdin)
    assert rc == 1 and out.count(b"\n") == 3
    assert err.splitlines() == [
        f"kcodec produce: stopped: 3 lines confirmed, 0 sent but unconfirmed (they may or may "
        f"not be in {topic_name!r}), 0 failed, line 4 not sent, input after it never read "
        "(resume from line 4)",
        "kcodec produce: error: line 4 is longer than 100 bytes (--max-line-bytes): not sent; "
        "brokers refuse records over their max.message.bytes (about 1 MB unless raised): split "
        "it, or raise --max-line-bytes and, if need be, the broker's or the topic's "
        "max.message.bytes"]
    assert [r.value for r in _records(kbroker.bootstrap, topic_name)] == [b"a", b"b", b"c"]


def test_a_huge_line_is_refused_before_it_is_read_whole(kbroker, topic_name) -> None:
    """50 MB without a newline: stopped after reading about the limit (1 MiB by default),
    with the report; the rest of the input is never read."""
    create(kbroker, topic_name, 1)
    child = kcodec("produce", "-b", kbroker.bootstrap, "-t", topic_name, stdin=subprocess.PIPE)
    fed = [0]

    def feed() -> None:
        try:
            child.stdin.write(b"first\n")
            for _ in range(50):
                child.stdin.write(b"y" * 1048576)
                fed[0] += 1
            child.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
    t = threading.Thread(target=feed, daemon=True)   # the writer owns stdin: it never ends early
    t.start()
    errs: list[bytes] = []
    reader = threading.Thread(target=lambda: errs.append(child.stderr.read()), daemon=True)
    reader.start()
    out = child.stdout.read()
    child.wait(60)
    reader.join(10)
    t.join(10)
    err = errs[0]
    assert child.returncode == 1 and out == b"partition 0 offset 0\n", err
    assert fed[0] < 50                            # it stopped reading: the writer was cut off
    assert "1 lines confirmed" in err.decode() and "(resume from line 2)" in err.decode()
    assert "line 2 is longer than 1048576 bytes" in err.decode()


def test_a_record_the_broker_refuses_is_named_with_the_resume_line(kbroker, topic_name) -> None:
    """A record over the topic's max.message.bytes (topics create --config): the broker
    refuses it; the producer splits the refused batch (as Java's does), so the line after
    it, which shared its batch, goes through; the report names the likely line, where to
    resume, and that a confirmed line after it would be sent again."""
    rc, out, err, _ = run("topics", "create", "-b", kbroker.bootstrap, topic_name,
                          "--config", "max.message.bytes=1000")
    assert (rc, out.strip()) == (0, f"{topic_name}: created"), err
    child = kcodec("produce", "-b", kbroker.bootstrap, "-t", topic_name, stdin=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(b"a\nb\n")
    child.stdin.flush()
    first = [child.stdout.readline() for _ in range(2)]   # confirmed before the big one
    child.stdin.write(b"z" * 3000 + b"\nc\n")
    rest, err = finish(child, 30)
    text = err.decode()
    assert child.returncode == 1 and first == [b"partition 0 offset 0\n", b"partition 0 offset 1\n"]
    assert rest == b"partition 0 offset 2\n"          # line 4, split from line 3's batch
    m = re.match(r"kcodec produce: stopped: 3 lines confirmed, 0 sent but unconfirmed .*, "
                 r"1 failed, input ended after line 4 \(resume from line 3\); 1 confirmed "
                 r"lines after it would be sent again\n", text)
    assert m, text
    assert "MESSAGE_TOO_LARGE" in text and "the longest line sent is line 3, 3000 bytes" in text
    assert [r.value for r in _records(kbroker.bootstrap, topic_name)] == [b"a", b"b", b"c"]


def test_a_line_over_the_brokers_default_limit(kbroker, topic_name) -> None:
    """2 MB in one line, --max-line-bytes raised to let it through: the broker's own limit
    (max.message.bytes, 1 MB by default) refuses it, and the report says where to resume."""
    create(kbroker, topic_name, 1)
    big = b"q" * 2_000_000
    rc, out, err, _ = run_bytes("produce", "-b", kbroker.bootstrap, "-t", topic_name,
                                "--max-line-bytes", "3000000", stdin=big + b"\n")
    assert (rc, out) == (1, b"")
    # --max-line-bytes also raises the producer's max_request_size, so the record reaches
    # the broker, whose limit refuses it (failed): nothing in the topic, resume from line 1
    first = err.splitlines()[0]
    assert first.startswith("kcodec produce: stopped: 0 lines confirmed, 0 sent but unconfirmed")
    assert first.endswith("1 failed, input ended after line 1 (resume from line 1)"), first
    assert "MESSAGE_TOO_LARGE" in err, err
    assert _records(kbroker.bootstrap, topic_name) == []


def test_interrupted_while_finding_the_broker_says_nothing_was_sent() -> None:
    """Ctrl-C while the broker does not answer yet: a report, not a traceback or a wait."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    conns: list = []
    threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True).start()
    port = srv.getsockname()[1]
    try:
        child = kcodec("produce", "-b", f"127.0.0.1:{port}", "-t", "t", stdin=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while not conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert conns, "it never connected"
        t0 = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = finish(child, 30)
        assert time.monotonic() - t0 < 10
    finally:
        srv.close()
        for c, _ in conns:
            c.close()
    assert (child.returncode, out) == (130, b"")
    assert err.decode().strip() == ("kcodec produce: interrupted before any input was read: "
                                    "nothing sent")


def test_no_broker_says_nothing_was_sent() -> None:
    from kcodec.testing.net import free_port

    port = free_port()
    rc, out, err, _ = run("produce", "-b", f"127.0.0.1:{port}", "-t", "t", stdin=b"a\n")
    assert (rc, out) == (1, "") and len(err.strip().splitlines()) == 1
    assert "Connection refused" in err and err.strip().endswith("(nothing sent, no input read)")


# ------------------------------------------------------------------ the pieces

@pytest.mark.parametrize("spec,want", [
    ("\\n", b"\n"), ("\\t", b"\t"), ("\\r\\n", b"\r\n"), ("\\0", b"\0"), ("\\x00", b"\0"),
    ("\\xfF", b"\xff"), ("\\\\", b"\\"), (":", b":"), ("::", b"::"), ("a\\tb", b"a\tb"),
    ("caf\udce9", b"caf\xe9"),      # a byte that is not UTF-8, as Python decodes argv
])
def test_delimiters_as_kcat_writes_them(spec, want) -> None:
    assert parse_delimiter(spec, "-K") == want


@pytest.mark.parametrize("spec,msg", [
    ("", "-D must not be empty"), ("\\x4", "\\x needs two hex digits"),
    ("\\xg0", "\\x needs two hex digits"), ("\\q", "unknown escape \\q"), ("\\", "unknown escape"),
])
def test_bad_delimiters(spec, msg) -> None:
    with pytest.raises(UsageError, match=re.escape(msg)):
        parse_delimiter(spec, "-D")


def test_split_key() -> None:
    assert split_key(b"k::v:w", b"::", None) == (b"k", b"v:w")
    assert split_key(b"v", b":", b"d") == (b"d", b"v")
    assert split_key(b":", b":", None) == (b"", b"")


class _Counting(io.BytesIO):
    """A stream that counts what was read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def readline(self, size: int | None = -1) -> bytes:   # type: ignore[override]
        b = super().readline(size)
        self.taken += len(b)
        return b

    def read1(self, size: int = -1) -> bytes:
        b = super().read1(size)
        self.taken += len(b)
        return b


@pytest.mark.parametrize("delim", [b"\n", b"\x00", b"--"])
def test_read_records_at_the_limit(delim) -> None:
    recs = [b"a" * 10, b"", b"b" * 9, b"c"]
    data = delim.join(recs)                              # no delimiter after the last
    assert list(read_records(io.BytesIO(data), delim, 10)) == recs
    assert list(read_records(io.BytesIO(data + delim), delim, 10)) == recs
    assert list(read_records(io.BytesIO(b""), delim, 10)) == []
    for data in (b"a" * 11 + delim + b"b", b"ok" + delim + b"a" * 11):
        with pytest.raises(TooLong):
            list(read_records(io.BytesIO(data), delim, 10))


@pytest.mark.parametrize("delim", [b"\n", b"\x00", b"--"])
def test_read_records_holds_no_more_than_the_limit(delim) -> None:
    stream = _Counting(b"z" * (50 * 1048576))
    got = read_records(stream, delim, 1000)
    with pytest.raises(TooLong):
        next(got)
    assert stream.taken <= 1000 + len(delim) + CHUNK


def test_read_records_many_small_ones_in_one_chunk() -> None:
    data = b"".join(b"%d\x00" % i for i in range(100000))
    assert list(read_records(io.BytesIO(data), b"\x00", 100)) == [b"%d" % i for i in range(100000)]
