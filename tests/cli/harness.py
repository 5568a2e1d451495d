"""Running the real ``kcodec`` command in a child process (as a user does, with real pipes
and signals) and the brokers the CLI tests run it against."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from kcodec.client import Admin, TopicPartition
from kcodec.testing.net import free_port
from tests.support import REPO

ROOT = str(REPO)


def kcodec(*argv: str | bytes, **kw: Any) -> subprocess.Popen:
    """``python -m kcodec ARGV`` run from a directory other than the checkout, as a user
    runs it."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    kw.setdefault("cwd", tempfile.gettempdir())
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "kcodec", *argv], env=env, **kw)


def finish(child: subprocess.Popen, timeout: float = 60) -> tuple[bytes, bytes]:
    """The rest of a child's output and its exit, reading through the pipes' buffered
    readers (``communicate`` would skip what ``readline`` already buffered)."""
    def close_stdin() -> None:   # (a feeding thread may hold the pipe's lock)
        try:
            child.stdin.close()
        except (OSError, ValueError):
            pass
    if child.stdin is not None:
        threading.Thread(target=close_stdin, daemon=True).start()
    err: list[bytes] = []
    t = threading.Thread(target=lambda: err.append(child.stderr.read()), daemon=True)
    t.start()
    timer = threading.Timer(timeout, child.kill)
    timer.start()
    try:
        out = child.stdout.read()
        child.wait()
        t.join(10)
    finally:
        timer.cancel()
    return out, err[0] if err else b""


def run(*argv: str, timeout: float = 60, stdin: bytes | None = None) -> tuple[int, str, str, float]:
    rc, out, err, secs = run_bytes(*argv, timeout=timeout, stdin=stdin)
    return rc, out.decode(), err, secs


def run_bytes(*argv: str | bytes, timeout: float = 60,
              stdin: bytes | None = None) -> tuple[int, bytes, str, float]:
    """The command's exit code, its stdout as bytes, its stderr, and how long it took;
    arguments may be bytes (passed to the child as they are, as a shell would)."""
    t0 = time.monotonic()
    p = kcodec(*argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
    out, err = p.communicate(stdin, timeout=timeout)
    return p.returncode, out, err.decode(), time.monotonic() - t0


class DyingBroker:
    """A one-node kcodec broker the test can kill (its port stops answering, its
    connections drop), with topic ``t``."""

    def __init__(self) -> None:
        from kcodec.broker import Cluster

        self.cluster = Cluster(1).start()
        self.cluster.create_topic("t")
        self.bootstrap = self.cluster.bootstrap

    def kill(self) -> None:
        self.cluster.stop_node(0)

    def close(self) -> None:
        self.cluster.stop()


class CliBroker:
    """kcodec's broker as the CLI guide starts it for its examples: ``kcodec broker --port P``
    in a process of its own, stopped with SIGINT."""

    def __init__(self, *extra: str, port: int | None = None) -> None:
        port = free_port() if port is None else port
        self.proc = kcodec("broker", "--port", str(port), *extra, stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        self.bootstrap = self.proc.stdout.readline().decode().strip()
        assert self.bootstrap == f"127.0.0.1:{port}", self.bootstrap

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def create(broker, topic: str, partitions: int) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        assert a.create_topics([topic], num_partitions=partitions)[topic] is None


def end_offsets(broker, topic: str, partitions: int) -> list[int]:
    """Records per partition, counted by reading (Tansu's LATEST offsets can be wrong)."""
    from kcodec.client import Consumer
    counts = [0] * partitions
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        idle = time.monotonic()
        while time.monotonic() - idle < 1.5:
            got = c.poll(0.2)
            for tp, recs in got.items():
                counts[tp.partition] += len(recs)
                idle = time.monotonic()
    return counts
