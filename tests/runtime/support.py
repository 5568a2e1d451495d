"""Harnesses of the runtime's tests: a real redis-server with AOF, ``kcodec broker`` and
``kcodec run`` as processes of their own (so tests can kill -9 them), and the record log the
test handlers write (tests.runtime.handlers)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kcodec.testing.net import accepts, free_port
from tests.support import REPO

ROOT = str(REPO)


def env(**extra: str) -> dict[str, str]:
    e = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for k in [k for k in e if k.startswith("KCODEC_RUN_")]:
        del e[k]
    e.update(extra)
    return e


def redis_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        pytest.skip("redis-server is not installed: apt-get install redis-server (Debian), or "
                    "run scripts/test with KCODEC_INSTALL_SYSTEM_PACKAGES=1 to have it installed")
    return path


class RedisServer:
    """redis-server on a free loopback port, AOF on (appendfsync always; or the given
    ``persistence`` arguments), in a temp dir;
    ``kill()`` is kill -9 and ``start()`` brings it back on the same port and data."""

    def __init__(self, persistence: tuple[str, ...] = ("--appendonly", "yes", "--appendfsync",
                                                       "always", "--save", "")) -> None:
        self.persistence = persistence
        self.binary = redis_binary()
        self.dir = tempfile.mkdtemp(prefix="kcodec-redis-")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             *self.persistence, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not accepts(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Broker:
    """``kcodec broker`` in a process of its own, data on disk so a kill -9 and restart
    keeps the topics and committed offsets."""

    def __init__(self, partitions: int = 4) -> None:
        self.dir = tempfile.mkdtemp(prefix="kcodec-broker-")
        self.port = free_port()
        self.partitions = partitions
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kcodec", "broker", "--port", str(self.port), "--data-dir",
             self.dir, "--partitions", str(self.partitions),
             "--config", "group.initial.rebalance.delay.ms=0"],   # groups form at once
            env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()
        if line != self.bootstrap:
            raise RuntimeError(f"kcodec broker said {line!r}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def produce(bootstrap: str, topic: str, n: int, start: int = 0, partitions: int = 4,
            value: Any = None) -> None:
    from kcodec.client import Admin, Producer

    with Admin(bootstrap_servers=bootstrap) as a:
        if topic not in a.list_topics():
            a.create_topics([topic], num_partitions=partitions)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(start, start + n):
            v = value(i) if value is not None else b"%d" % i
            p.send(topic, v, key=b"%d" % i)
        p.flush(60)


class Run:
    """``kcodec run`` as a child process with its own state dir and record log."""

    def __init__(self, bootstrap: str, topic: str, group: str, *args: str,
                 handler: str = "tests.runtime.handlers:record", state_dir: str | None = None,
                 log: str | None = None, mode: str = "ok", extra_env: dict | None = None) -> None:
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="kcodec-run-")
        self.log = log or os.path.join(self.state_dir, "handled.log")
        self.stderr_path = os.path.join(self.state_dir, "run.err")
        self.argv = [sys.executable, "-m", "kcodec", "run", handler, "-t", topic, "-g", group,
                     "-b", bootstrap, "--state-dir", self.state_dir, "--linger-ms", "20",
                     *args]
        self.env = env(KCODEC_TEST_LOG=self.log, KCODEC_TEST_MODE=mode, **(extra_env or {}))
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self._err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=self._err, cwd=ROOT)

    @property
    def socket(self) -> str:
        return os.path.join(self.state_dir, "control.sock")

    def ctl(self, op: str, **args: Any) -> Any:
        from kcodec.runtime.control import ask

        return ask(self.socket, op, **args)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                st = self.ctl("status", timeout=5)
                if all(p["pid"] for p in st["processes"]):
                    return
            except Exception:
                pass
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"kcodec run exited {self.proc.returncode}:\n{self.stderr()}")
            time.sleep(0.2)
        raise AssertionError(f"kcodec run not ready in {timeout} s:\n{self.stderr()}")

    def child_pids(self, role: str) -> list[int]:
        return [p["pid"] for p in self.ctl("status")["processes"] if p["role"] == role and p["pid"]]

    def stop(self, timeout: float = 60) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            raise AssertionError(f"kcodec run did not stop in {timeout} s:\n{self.stderr()}") from None

    def kill_all(self) -> None:
        """kill -9 the master and (what it had started) its children."""
        pids = []
        try:
            pids = [p["pid"] for p in self.ctl("status", timeout=3)["processes"] if p["pid"]]
        except Exception:
            pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stderr(self) -> str:
        try:
            return Path(self.stderr_path).read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def handled(self) -> Counter:
        return read_log(self.log)


def read_log(path: str) -> Counter:
    """(topic, partition, offset) -> times the handler saw it (done or not)."""
    c: Counter = Counter()
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and line.endswith("\n"):
                    c[(parts[0], int(parts[1]), int(parts[2]))] += 1
    except FileNotFoundError:
        pass
    return c


def wait_for(pred: Any, timeout: float, what: str, on_fail: Any = None) -> None:
    """Until ``pred()`` is true; a ControlError (the runtime not up yet) counts as false."""
    from kcodec.runtime.control import ControlError

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except ControlError as exc:
            last = exc
        time.sleep(0.1)
    extra = on_fail() if on_fail is not None else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last})\n{extra}")
