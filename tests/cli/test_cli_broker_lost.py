"""A broker killed under ``kcodec produce`` and ``kcodec consume`` (a ``kcodec broker``
process, SIGKILL): the command says so on stderr within seconds, not after --timeout, keeps
retrying within --timeout as the client does, and when the broker is back (the same port and
data directory) goes on: every record it confirmed is in the topic, once."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time

import pytest

from kcodec.client import Producer
from kcodec.testing.net import free_port
from tests.cli.harness import CliBroker, create, kcodec, run

pytestmark = pytest.mark.slow   # ~10 s each: a broker process killed and started again

NOTICE = "no answer from the broker"


def _lines(stream) -> queue.Queue:
    """The lines of ``stream`` as they come (a thread reads them)."""
    q: queue.Queue = queue.Queue()

    def read() -> None:
        for line in iter(stream.readline, b""):
            q.put(line.decode())
        q.put(None)
    threading.Thread(target=read, daemon=True).start()
    return q


def _wait_for(q: queue.Queue, text: str, secs: float) -> tuple[str, list[str]]:
    """The first line holding ``text`` within ``secs``, and the lines before it."""
    seen: list[str] = []
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if line is None:
            break
        if text in line:
            return line, seen
        seen.append(line)
    raise AssertionError(f"no line with {text!r} within {secs} s; got {seen}")


def _kill(b: CliBroker) -> None:
    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(30)


def test_produce_says_at_once_that_the_broker_died_and_resumes_when_it_is_back(tmp_path) -> None:
    port, data = free_port(), str(tmp_path / "data")
    b = CliBroker("--data-dir", data, port=port)
    child = None
    try:
        create(b, "t", 1)
        child = kcodec("produce", "-b", b.bootstrap, "-t", "t", "--timeout", "60",
                       stdin=subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        child.stdin.write(b"".join(b"before %d\n" % i for i in range(100)))
        child.stdin.flush()
        first = [child.stdout.readline() for _ in range(100)]
        assert first[-1] == b"partition 0 offset 99\n"
        err = _lines(child.stderr)
        _kill(b)
        t0 = time.monotonic()
        child.stdin.write(b"after\n")
        child.stdin.flush()
        line, _ = _wait_for(err, NOTICE, 15)
        took = time.monotonic() - t0
        assert took < 15 and "refused" in line.lower() and "--timeout" in line, (took, line)
        b = CliBroker("--data-dir", data, port=port)      # back, within --timeout
        assert child.stdout.readline() == b"partition 0 offset 100\n"
        _wait_for(err, "the broker answers again", 15)
        child.stdin.close()
        assert child.wait(60) == 0
        last, _ = _wait_for(err, "records confirmed", 10)
        assert "101 records confirmed" in last, last
        rc, out, stderr, _ = run("consume", "-b", b.bootstrap, "-t", "t", "-o", "beginning",
                                 "-e", "-q")
        assert rc == 0, stderr
        assert out.splitlines() == [f"before {i}" for i in range(100)] + ["after"]
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        b.stop()


def test_consume_says_at_once_that_the_broker_died_and_goes_on_when_it_is_back(tmp_path) -> None:
    port, data = free_port(), str(tmp_path / "data")
    b = CliBroker("--data-dir", data, port=port)
    child = None
    try:
        create(b, "t", 1)
        with Producer(bootstrap_servers=b.bootstrap) as p:
            for i in range(50):
                p.send("t", b"r%d" % i, partition=0)
            p.flush(30)
        child = kcodec("consume", "-b", b.bootstrap, "-t", "t", "--from-beginning",
                       "--timeout", "60")
        assert child.stdout is not None and child.stderr is not None
        assert [child.stdout.readline() for _ in range(50)][-1] == b"r49\n"
        err = _lines(child.stderr)
        _kill(b)
        t0 = time.monotonic()
        line, _ = _wait_for(err, NOTICE, 15)
        assert time.monotonic() - t0 < 15 and "--timeout" in line, line
        b = CliBroker("--data-dir", data, port=port)
        with Producer(bootstrap_servers=b.bootstrap) as p:
            p.send("t", b"later", partition=0).result(30)
        assert child.stdout.readline() == b"later\n"
        child.send_signal(signal.SIGINT)
        child.wait(60)                   # (stderr is read by the thread of _lines alone)
        out = child.stdout.read()
        rest = []
        while (line := err.get(timeout=10)) is not None:
            rest.append(line)
        assert child.returncode == 130 and out == b"", rest
        assert any("interrupted (SIGINT): 51 records printed" in x for x in rest), rest
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        b.stop()
