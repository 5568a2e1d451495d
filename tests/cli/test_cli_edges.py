"""The ``kcodec`` command at the edges: the real command in a child process, against the
real brokers (Tansu, and the kcodec broker where one is killed), with real signals."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from kcodec.client import Admin, Producer, TopicPartition
from kcodec.testing.net import free_port
from tests.cli.harness import ROOT, CliBroker, finish, kcodec, run
from tests.cli.harness import create as _create
from tests.cli.harness import end_offsets as _end_offsets

# ------------------------------------------------------------------ 1. consume -g and signals

@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_consume_group_interrupted_commits_exactly_what_it_printed(either, topic_name, sig) -> None:
    broker = either
    _create(broker, topic_name, 1)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=20) as p:
        for i in range(30000):
            p.send(topic_name, b"value-%d" % i, partition=0)
        p.flush()
    group = f"g-{topic_name}"
    child = kcodec("consume", "-b", broker.bootstrap, "-t", topic_name, "-g", group,
                   "--from-beginning", "--format", "text")
    try:
        assert child.stdout is not None
        first = [child.stdout.readline() for _ in range(200)]   # it is printing now
        child.send_signal(sig)
        rest, err = finish(child, 30)
    finally:
        if child.poll() is None:
            child.kill()
    lines = b"".join(first) + rest
    assert child.returncode == 128 + sig, err
    assert lines.endswith(b"\n")                       # the last line is complete
    offsets = [int(m.group(1)) for m in re.finditer(rb"^0:(\d+) value-\1$", lines, re.M)]
    assert len(offsets) == lines.count(b"\n") and offsets == list(range(len(offsets)))
    assert len(offsets) < 30000                        # it really was interrupted
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        committed = a.committed_offsets(group, [topic_name])
    assert committed == {TopicPartition(topic_name, 0): len(offsets)}   # = last printed + 1
    # (a broker without the consumer group protocol: one notice of the classic fallback)
    text = "\n".join(line for line in err.decode().strip().splitlines()
                     if "using the classic protocol" not in line)
    assert text == (f"kcodec consume: interrupted ({sig.name}): {len(offsets)} "
                                    f"records printed; group {group!r} committed up to the "
                                    f"last printed line")


# ------------------------------------------------------------------ 3. produce and signals

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_produce_interrupted_waiting_for_input_reports_and_loses_nothing(either, topic_name, sig) -> None:
    broker = either
    _create(broker, topic_name, 1)
    child = kcodec("produce", "-b", broker.bootstrap, "-t", topic_name, stdin=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(b"".join(b"line %d\n" % i for i in range(3000)))
    child.stdin.flush()
    lines = [child.stdout.readline() for _ in range(3000)]   # all confirmed; stdin stays open
    child.send_signal(sig)
    rest, err = finish(child, 30)
    assert child.returncode == 128 + sig and rest == b""
    assert all(re.fullmatch(rb"partition 0 offset \d+\n", x) for x in lines)
    assert err.decode().strip() == (
        f"kcodec produce: interrupted: 3000 lines confirmed, 0 sent but unconfirmed (they may "
        f"or may not be in {topic_name!r}), 0 failed, input after line 3000 never read "
        f"(resume from line 3001)")


FLOOD = 1_000_000_000


@pytest.mark.slow   # ~4 s
def test_produce_interrupted_mid_flood_confirms_what_is_in_the_topic(broker, topic_name) -> None:
    """Lines piped in without end (the producer got fast enough to finish a 1M-line flood
    before the signal), SIGINT in the middle: it flushes what it sent; every record in the
    topic has its confirmation line, and stderr says where to resume."""
    _create(broker, topic_name, 1)
    child = kcodec("produce", "-b", broker.bootstrap, "-t", topic_name, stdin=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def feed() -> None:
        try:
            for start in range(0, FLOOD, 10_000):      # ends only with the child
                child.stdin.write(b"".join(b"%d\n" % i for i in range(start, start + 10_000)))
            child.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    first = [child.stdout.readline() for _ in range(20000)]
    child.send_signal(signal.SIGINT)
    rest, err = finish(child, 60)
    writer.join(10)
    confirmed = len(first) + rest.count(b"\n")
    assert child.returncode == 130, err
    m = re.fullmatch(r"kcodec produce: interrupted: (\d+) lines confirmed, (\d+) sent but unconfirmed "
                     r"\(.*\), 0 failed, input after line (\d+) never read \(resume from line (\d+)\)",
                     err.decode().strip())
    assert m, err
    ok, unconfirmed, read, resume = map(int, m.groups())
    assert ok == confirmed and unconfirmed == 0 and read == ok and resume == read + 1
    assert ok < FLOOD
    assert _end_offsets(broker, topic_name, 1) == [ok]


def test_produce_prints_a_summary(broker, topic_name) -> None:
    _create(broker, topic_name, 2)
    rc, out, err, _ = run("produce", "-b", broker.bootstrap, "-t", topic_name, stdin=b"a\nb\nc\n")
    assert rc == 0 and len(out.splitlines()) == 3
    assert re.fullmatch(rf"kcodec produce: 3 records confirmed in {topic_name!r} in \d+\.\d\d s",
                        err.strip()), err


def test_progress_line_on_a_terminal(broker, topic_name) -> None:
    import pty

    _create(broker, topic_name, 1)
    master, slave = pty.openpty()
    p = kcodec("produce", "-b", broker.bootstrap, "-t", topic_name, stdin=subprocess.PIPE,
               stderr=slave)
    os.close(slave)
    out, _ = p.communicate(b"".join(b"%d\n" % i for i in range(2000)), timeout=60)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    err = b"".join(chunks).decode()
    assert p.returncode == 0 and out.count(b"\n") == 2000
    assert re.search(r"\rsent \d+ records, \d+ confirmed, [\d,]+/s, \d+ s", err), err
    assert "2000 records confirmed" in err


def test_consume_progress_line_on_a_terminal(broker, topic_name) -> None:
    import pty

    _create(broker, topic_name, 1)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=20) as p:
        for i in range(5000):
            p.send(topic_name, b"%d" % i, partition=0)
        p.flush()
    master, slave = pty.openpty()
    p = kcodec("consume", "-b", broker.bootstrap, "-t", topic_name, "--from-beginning",
               "--idle", "1.5", stderr=slave)
    os.close(slave)
    out, _ = p.communicate(timeout=60)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    err = b"".join(chunks).decode()
    assert p.returncode == 0 and out.count(b"\n") == 5000
    # the last count drawn is the total (it stayed at the first poll's count while idle)
    assert re.findall(r"\rconsumed (\d+) records, [\d,]+/s, \d+ s", err)[-1] == "5000", err


# ------------------------------------------------------------------ 4. errors name the cause

def test_cli_connection_refused_is_fast_and_named() -> None:
    port = free_port()
    for argv in (["topics", "list"], ["produce", "-t", "x", "m"], ["consume", "-t", "x"]):
        # --timeout 60: waiting for it (the old behaviour) would take a minute; the bound
        # below leaves room for starting the interpreter on a loaded machine
        rc, out, err, secs = run(*argv, "-b", f"127.0.0.1:{port}", "--timeout", "60")
        assert rc == 1 and out == "" and secs < 20, (argv, err)
        assert f"cannot connect to 127.0.0.1:{port}: Connection refused" in err
        assert len(err.strip().splitlines()) == 1


def test_cli_non_kafka_peer_and_unknown_host_are_named() -> None:
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        try:
            c, _ = srv.accept()
            with c:
                c.recv(4096)
                c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        except OSError:
            pass
    threading.Thread(target=serve, daemon=True).start()
    port = srv.getsockname()[1]
    rc, _, err, secs = run("topics", "list", "-b", f"127.0.0.1:{port}", "--timeout", "60")
    srv.close()
    assert rc == 1 and f"127.0.0.1:{port} is not a Kafka broker" in err and secs < 20
    rc, _, err, _ = run("topics", "list", "-b", "no-such-host.invalid:9092")
    assert rc == 1 and "cannot resolve host 'no-such-host.invalid'" in err


def test_cli_malformed_address_is_a_usage_error() -> None:
    rc, out, err, secs = run("consume", "-t", "x", "-b", "127.0.0.1:9092:9093", "--timeout", "60")
    assert rc == 2 and out == "" and "bad address '127.0.0.1:9092:9093'" in err and secs < 20


def test_demo_against_a_closed_port_fails_at_once() -> None:
    rc, _, err, secs = run("demo", "-b", "127.0.0.1:1", "-n", "10")   # it took 61 s
    assert rc == 1 and "127.0.0.1:1: Connection refused" in err and secs < 20


# ------------------------------------------------------------------ 5. what users expect

def test_missing_group_is_an_error(broker) -> None:
    for cmd in ("offsets", "lag", "describe-groups"):
        rc, out, err, _ = run(cmd, "-b", broker.bootstrap, "-g", "no-such-group-x1")
        assert (rc, out) == (1, ""), (cmd, out, err)
        assert err.strip() == (f"kcodec {cmd}: error: group 'no-such-group-x1' does not exist: "
                               "'kcodec groups list' shows the groups")


def test_consume_group_on_a_missing_topic_fails_at_once(broker, topic_name) -> None:
    rc, out, err, secs = run("consume", "-b", broker.bootstrap, "-t", topic_name, "-g", "g1",
                             "--timeout", "30")   # it hung (11 min), or waited out the timeout
    assert (rc, out) == (1, "") and secs < 20
    # the shared broker may hold a topic of a similar name: then a "did you mean" is right
    assert re.fullmatch(rf"kcodec consume: error: topic {re.escape(repr(topic_name))} does not "
                        r"exist( \(did you mean '[^']+'\?\))?: 'kcodec topics list' shows the "
                        r"topics, 'kcodec topics create NAME' makes one", err.strip()), err


def test_consume_text_escapes_binary_values_and_shows_headers(broker, topic_name) -> None:
    _create(broker, topic_name, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send(topic_name, b"a\x00b\nc\\d\xff", key=b"k\tk", headers=[("h", b"v\r1"), ("n", None)],
               partition=0).result(10)
    rc, out, err, _ = run("consume", "-b", broker.bootstrap, "-t", topic_name, "--from-beginning",
                          "-n", "1", "--format", "text")
    assert rc == 0, err
    assert out == "0:0 key=k\\tk headers=[h=v\\r1, n=null] a\\x00b\\nc\\\\d\\xff\n"


def test_consume_several_topics(broker, topic_name) -> None:
    other = topic_name + "-b"
    _create(broker, topic_name, 1)
    _create(broker, other, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send(topic_name, b"one", partition=0).result(10)
        p.send(other, b"two", partition=0).result(10)
    rc, out, err, _ = run("consume", "-b", broker.bootstrap, "-t", topic_name, "-t", other,
                          "--from-beginning", "-n", "2", "--format", "text")
    assert rc == 0, err
    assert set(out.splitlines()) == {f"{topic_name}:0:0 one", f"{other}:0:0 two"}


def test_dump_log_directory_without_segments(tmp_path) -> None:
    rc, out, err, _ = run("dump-log", str(tmp_path))
    assert rc == 1 and err.strip() == \
        f"kcodec dump-log: error: no log segments (.log files) in directory {tmp_path}, nor in " \
        "partition directories (<topic>-<partition>/) in it or under its logs/"


@pytest.mark.slow   # ~4 s; the in-process twin (tests/broker/test_broker_client.py) runs by default
def test_keyless_lines_spread_over_partitions(broker, topic_name) -> None:
    """seq 1 50000 | kcodec produce -t spread: KIP-794 moves on after batch_size bytes
    (the CLI's batch_size is kcat's 1,000,000 bytes, all of this input: 16 KiB here, the
    client's default, so the input spans many batches)."""
    _create(broker, topic_name, 4)
    data = b"".join(b"%020d\n" % i for i in range(50000))
    rc, out, err, _ = run("produce", "-b", broker.bootstrap, "-t", topic_name, "--json",
                          "-X", "batch_size=16384", stdin=data, timeout=120)
    assert rc == 0, err
    per = [0] * 4
    for m in re.finditer(r'"partition":(\d)', out):
        per[int(m.group(1))] += 1
    assert sum(per) == 50000 and min(per) > 0 and max(per) < 0.6 * 50000, per


# ------------------------------------------------------------------ 6. every timeout honoured

def test_produce_timeout_bounds_delivery_when_the_broker_dies(dying) -> None:
    child = kcodec("produce", "-b", dying.bootstrap, "-t", "t", "--timeout", "2",
                   stdin=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(b"before\n")
    child.stdin.flush()
    assert child.stdout.readline() == b"partition 0 offset 0\n"
    dying.kill()
    t0 = time.monotonic()
    child.stdin.write(b"after\n")
    child.stdin.flush()
    out, err = finish(child, 30)
    took = time.monotonic() - t0
    text = err.decode()
    assert child.returncode == 1 and took < 2 + 8, (took, text)   # it took 120 s
    assert "timed out after 2000 ms" in text and "last error:" in text
    # line 2 failed: resume there (it said "input after line 2 never read (resume from line 3)")
    assert "1 lines confirmed, 0 sent but unconfirmed" in text and "1 failed" in text
    assert "input ended after line 2 (resume from line 2)" in text, text


def test_consume_timeout_bounds_a_dead_broker(dying) -> None:
    with Producer(bootstrap_servers=dying.bootstrap) as p:
        for v in (b"a", b"b"):
            p.send("t", v, partition=0).result(10)
    child = kcodec("consume", "-b", dying.bootstrap, "-t", "t", "--from-beginning",
                   "--timeout", "2", "--format", "text")
    assert child.stdout is not None
    assert child.stdout.readline() == b"0:0 a\n"
    dying.kill()
    t0 = time.monotonic()
    out, err = finish(child, 30)
    took = time.monotonic() - t0
    assert child.returncode == 1 and took < 2 + 8, (took, err)   # it never ended
    assert "no broker answered for 2.0 s; last error:" in err.decode()


def test_produce_resume_line_is_the_first_line_not_confirmed() -> None:
    """The report's resume line: every line before it is in the topic."""
    import argparse

    from kcodec.cli.produce import _rest, _Tally

    def tally(read: int, confirmed: int, failed: int, first_failed: int, eof: bool) -> _Tally:
        n = _Tally()
        n.read = n.sent = read
        n.confirmed, n.failed, n.first_failed, n.eof = confirmed, failed, first_failed, eof
        return n
    stdin = argparse.Namespace(messages=[])
    assert _rest(stdin, tally(10, 10, 0, 0, False), None) == \
        "input after line 10 never read (resume from line 11)"
    assert _rest(stdin, tally(10, 10, 0, 0, True), None) == "input ended after line 10"
    # line 4 failed, lines 5-6 were confirmed after it (another partition), 7-10 pending
    assert _rest(stdin, tally(10, 5, 1, 4, True), None) == \
        "input ended after line 10 (resume from line 4); 2 confirmed lines after it would be sent again"
    n = tally(10, 6, 0, 0, False)       # 7-10 sent, unconfirmed
    assert _rest(stdin, n, None) == "input after line 10 never read (resume from line 7)"
    args = argparse.Namespace(messages=["a"] * 12)
    assert _rest(args, tally(10, 10, 0, 0, False), 2) == "2 never sent (resume from message 11)"


# ------------------------------------------------------------------ 11. a broker for the examples

@pytest.mark.slow   # ~8 s: a dozen commands, one idle wait
def test_readme_broker_serves_the_command_line_examples() -> None:
    """The CLI guide's "A broker for the examples" and its command list
    (docs/guide/cli.md), as written (with -b for the free port the test takes instead of
    9092)."""
    b = CliBroker()
    try:
        bs = ["-b", b.bootstrap]

        def ok(*argv: str, stdin: bytes | None = None) -> list[str]:
            rc, out, err, _ = run(*argv, *bs, stdin=stdin)
            assert rc == 0, (argv, err)
            return out.splitlines()
        assert ok("topics", "create", "-p", "4", "events") == ["events: created"]
        assert len(ok("produce", "-t", "events", "-k", "user-42", "-c", "lz4", "-H", "source=cli",
                      "hello", "world")) == 2
        assert len(ok("produce", "-t", "events", stdin=b"".join(b"%d\n" % i for i in range(1, 1001)))) == 1000
        (line,) = ok("produce", "-t", "events", "-p", "2", "--acks", "1", "m")
        assert re.fullmatch(r"partition 2 offset \d+", line), line   # (keyless lines may be there too)
        assert len(ok("produce", "-t", "events", "-K", ":",
                      stdin=b"user-1:login\nuser-2:logout\n")) == 2
        assert len(ok("consume", "-t", "events", "-o", "beginning", "-e")) == 1005
        last10 = ok("consume", "-t", "events", "-p", "2", "-o", "-10", "-e", "--format", "text")
        assert 1 <= len(last10) <= 10 and all(re.match(r"2:\d+ ", x) for x in last10), last10
        assert len(ok("consume", "-t", "events", "-o", "s@1700000000000", "-n", "10", "--json")) == 10
        ok("topics", "create", "audit")
        assert len(ok("consume", "-t", "events", "-t", "audit", "-g", "reports", "--from-beginning",
                      "--idle", "2")) == 1005
        assert len(ok("metadata", "brokers")) == 2 and len(ok("metadata", "topics", "-t", "events")) == 5
        # consume -g joins with the consumer protocol (KIP-848) by default
        assert ok("groups", "list")[1].split()[:3] == ["reports", "consumer", "Empty"]
        assert ok("describe-groups", "-g", "reports", "-t", "events")[1].split()[:2] == ["reports", "Empty"]
        assert {r.split()[-1] for r in ok("offsets", "-g", "reports", "-t", "events")[1:]} == {"0"}
        # the group's partitions: those it committed (it printed records of; no member now)
        (line,) = ok("lag", "-g", "reports")
        assert re.fullmatch(r"reports: lag 0 \([1-5] partitions\)", line), line
    finally:
        assert b.stop() == 0      # kill -INT %1: a clean stop


@pytest.mark.slow   # ~6 s: a --timeout of 4 s waited out
def test_consume_group_timeout_bounds_a_dead_broker(dying) -> None:
    """consume -g: the lost broker is named within --timeout (leaving the group did not
    wait for a commit to the dead coordinator: 3.3 times --timeout)."""
    with Producer(bootstrap_servers=dying.bootstrap) as p:
        p.send("t", b"a", partition=0).result(10)
    child = kcodec("consume", "-b", dying.bootstrap, "-t", "t", "-g", "g", "--from-beginning",
                   "--timeout", "4", "--format", "text")
    assert child.stdout is not None
    assert child.stdout.readline() == b"0:0 a\n"
    dying.kill()
    t0 = time.monotonic()
    out, err = finish(child, 60)
    took = time.monotonic() - t0
    assert child.returncode == 1 and took < 4 + 4, (took, err)
    assert "no broker answered for 4.0 s; last error:" in err.decode()


def test_interrupt_while_starting_exits_130_without_a_traceback() -> None:
    """Ctrl-C while the commands are imported (over a second on a loaded machine): it
    printed a KeyboardInterrupt traceback and died of the signal."""
    code = ("import os, signal, sys, kcodec.cli as cli\n"
            "real = cli.build_parser\n"
            "def slow(*args, **kwargs):\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(*args, **kwargs)\n"
            "cli.build_parser = slow\n"
            "sys.exit(cli.main(['info']))\n")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (130, b"", b"")


@pytest.mark.slow   # ~8 s
def test_produce_flood_fails_within_the_timeout_when_the_broker_dies(dying) -> None:
    """Lines without end, the broker killed mid-flood, --timeout 5: it fails about 5 s after
    the kill, naming the cause, with a resume line right after the last confirmed one (it
    waited another --timeout for the records behind the first failure: 2.2 times it)."""
    child = kcodec("produce", "-b", dying.bootstrap, "-t", "t", "--timeout", "5",
                   stdin=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def feed() -> None:
        try:
            for start in range(0, FLOOD, 10_000):
                child.stdin.write(b"".join(b"%d\n" % i for i in range(start, start + 10_000)))
        except (BrokenPipeError, ValueError, OSError):
            pass
    threading.Thread(target=feed, daemon=True).start()
    first = [child.stdout.readline() for _ in range(2000)]
    dying.kill()
    t0 = time.monotonic()
    rest, err = finish(child, 60)
    took = time.monotonic() - t0
    text = err.decode()
    assert child.returncode == 1 and took < 5 + 3, (took, text)
    confirmed = len(first) + rest.count(b"\n")
    # (after the notice that the broker stopped answering)
    m = re.search(r"^kcodec produce: stopped: (\d+) lines confirmed, .* \(resume from line (\d+)\)",
                  text, re.M)
    assert m and int(m.group(1)) == confirmed and int(m.group(2)) == confirmed + 1, text
    assert "timed out after 5000 ms" in text or "buffer_memory full" in text, text


def test_produce_send_refused_is_reported_with_the_resume_line(capsys) -> None:
    """``send`` itself failing (the buffer stayed full for --timeout): the report and the
    resume line, not an error that escapes without them."""
    import argparse
    import concurrent.futures

    from kcodec.cli._client import Graceful
    from kcodec.cli.produce import _Options, _send_all
    from kcodec.client import KafkaTimeoutError, SendResult

    class Refusing:
        def __init__(self) -> None:
            self.n = 0

        def send(self, topic: str, value: bytes, **kw: Any) -> concurrent.futures.Future:
            self.n += 1
            if self.n == 3:
                raise KafkaTimeoutError("buffer_memory stayed full for 5000 ms")
            fut: concurrent.futures.Future = concurrent.futures.Future()
            fut.set_result(SendResult(0, self.n - 1, 0))
            return fut

    args = argparse.Namespace(topic="t", partition=None, json=False, timeout=5.0,
                              max_line_bytes=100, messages=["a", "b", "c", "d"],
                              quiet=False, each=True)
    with Graceful() as sig:
        rc = _send_all(args, _Options(None, None, b"\n", []), Refusing(), sig)
    out, err = capsys.readouterr()
    assert rc == 1 and out == "partition 0 offset 0\npartition 0 offset 1\n"
    assert err.splitlines() == [
        "kcodec produce: stopped: 2 lines confirmed, 0 sent but unconfirmed (they may or may "
        "not be in 't'), 0 failed, 2 never sent (resume from message 3)",
        "kcodec produce: error: buffer_memory stayed full for 5000 ms"]
