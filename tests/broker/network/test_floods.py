"""A canary beside each flood: while hostile clients hammer the broker (a separate process,
as in production), a canary client logs in and produces one record again and again; each
login + produce must take under 1 s (or, on a machine so loaded that the canary alone takes
longer, under CANARY_X times its slowest run without a flood, measured just before), and
the broker's RSS must stay under its baseline plus MEMORY_BOUND_MB. A stall is what this
catches: before the fixes the canary waited 7 to 40 s. The floods are the shapes that stalled it before:

* 100 connections that never log in, sending ~500 KiB ApiVersions of 120,000 unknown tags;
* 4 logged-in connections sending DescribeGroups of a million empty group ids (refused at
  the count) and of 99,000 (within the bound: served, in the large-request lane);
* 4 logged-in connections producing zstd batches that expand to 64 MiB (refused at 256x).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from kcodec.protocol import SaslAuthenticateRequest, SaslHandshakeRequest, encode_request
from kcodec.records import RecordBatchBuilder

pytestmark = pytest.mark.slow

CANARY_S = 1.0           # login + produce of the canary
CANARY_X = 3.0           # ... or this many times its slowest without a flood, if more
CALM_S = 1.5             # how long the canary runs alone first
MEMORY_BOUND_MB = 400    # the broker's RSS over its baseline, through any flood
FLOOD_S = 8.0


def uvar(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(api_key: int, version: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", api_key, version, 7, 5) + b"flood" + uvar(0)
    return struct.pack(">i", len(head) + len(body)) + head + body


LOGIN = (encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1, "flood")
         + encode_request(SaslAuthenticateRequest(auth_bytes=b"\0mallory\0pw"), 2, 2, "flood"))


def tags_flood() -> bytes:
    tags = 120_000
    return frame(18, 3, uvar(2) + b"a" + uvar(2) + b"b" + uvar(tags)
                 + b"".join(uvar(100 + t) + uvar(0) for t in range(tags)))


def groups_flood(n: int) -> bytes:
    return frame(15, 5, uvar(n + 1) + uvar(1) * n + b"\0" + uvar(0))


def bomb_flood() -> bytes:
    b = RecordBatchBuilder(compression=4)
    b.append(None, bytes(64 << 20), [], 1_700_000_000_000)
    batch = bytes(b.build())
    body = (uvar(0) + struct.pack(">hi", -1, 5000) + uvar(2) + uvar(6) + b"bombs"
            + uvar(2) + struct.pack(">i", 0) + uvar(len(batch) + 1) + batch
            + uvar(0) + uvar(0) + uvar(0))
    return frame(0, 9, body)


class Broker:
    def __init__(self, tmp_path) -> None:
        users = tmp_path / "users"
        users.write_text("alice:pw\nmallory:pw\n")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kcodec", "broker", "--json", "--sasl-users", str(users),
             "--sasl-mechanisms", "PLAIN"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        line = self.proc.stdout.readline()
        assert line, "the broker did not start"
        self.bootstrap = json.loads(line)["bootstrap"]
        host, port = self.bootstrap.split(",")[0].rsplit(":", 1)
        self.addr = (host, int(port))

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def flood(addr: tuple[str, int], connections: int, data: bytes, login: bool,
          stop: threading.Event) -> list[threading.Thread]:
    def run() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(addr, timeout=5) as s:
                    if login:
                        s.sendall(LOGIN)
                        s.recv(4096)
                    s.sendall(data)
                    while s.recv(1 << 16):
                        if stop.is_set():
                            break
            except OSError:
                time.sleep(0.01)
    threads = [threading.Thread(target=run, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    return threads


def canary(bootstrap: str) -> float:
    from kcodec.client import Producer

    t = time.monotonic()
    with Producer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_username="alice", sasl_password="pw",
                  linger_ms=0, request_timeout_ms=10000, api_timeout_ms=15000) as p:
        p.send("canary", b"tweet").result(15)
    return time.monotonic() - t


FLOODS: dict[str, tuple[Callable[[], bytes], int, bool]] = {
    "tags-before-login": (tags_flood, 100, False),
    "million-group-ids": (lambda: groups_flood(1_000_000), 4, True),
    "99k-group-ids": (lambda: groups_flood(99_000), 4, True),
    "zstd-bombs": (bomb_flood, 4, True),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("floods"))
    canary(b.bootstrap)          # topic created, everything warm
    yield b
    b.stop()


@pytest.mark.parametrize("name", list(FLOODS))
def test_a_canary_beside_the_flood(broker, name):
    make, connections, login = FLOODS[name]
    data = make()
    base = broker.rss_mb()
    calm: list[float] = []          # the canary alone, as loaded as the machine is now
    until = time.monotonic() + CALM_S
    while time.monotonic() < until:
        calm.append(canary(broker.bootstrap))
    bound = max(CANARY_S, CANARY_X * max(calm))
    stop = threading.Event()
    threads = flood(broker.addr, connections, data, login, stop)
    try:
        time.sleep(1.0)               # the flood is on
        times, peak = [], base
        deadline = time.monotonic() + FLOOD_S
        while time.monotonic() < deadline:
            times.append(canary(broker.bootstrap))
            peak = max(peak, broker.rss_mb())
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    print(f"{name}: canary login+produce max {max(times):.3f} s over {len(times)} runs "
          f"(alone: max {max(calm):.3f} s), broker RSS {base:.0f} -> peak {peak:.0f} MiB")
    assert max(times) < bound, (bound, calm, times)
    assert peak - base < MEMORY_BOUND_MB, (base, peak)
    assert broker.proc.poll() is None
