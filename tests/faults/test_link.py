"""The fault link does what the fault tests say it does: delay, one-way and two-way
partitions, loss, duplication and reordering that TCP survives, and resets that break
connections -- measured with plain sockets across the namespaces, and with the link's own
counters. Slow tests (``-m slow``), root only, like the fault runs."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import pytest

from tests.support.faultnet import BROKER_IP, FaultNet

pytestmark = pytest.mark.slow

WHY_NOT = FaultNet.available()
PORT = 9999

ECHO = f"""
import socket, threading
def echo(c):
    try:
        while (b := c.recv(65536)):
            c.sendall(b)
    except OSError:
        pass
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(({BROKER_IP!r}, {PORT}))
s.listen()
print("up", flush=True)
while True:
    threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()
"""

PROBE = f"""
import json, os, socket, sys, threading, time
mode, arg = sys.argv[1], float(sys.argv[2])
out = {{}}
try:
    c = socket.create_connection(({BROKER_IP!r}, {PORT}), timeout=3)
    c.settimeout(60)
    if mode == "rtt":                   # arg round trips of one byte
        out["rtt"] = []
        for _ in range(int(arg)):
            t = time.monotonic()
            c.sendall(b"x")
            assert c.recv(1) == b"x"
            out["rtt"].append(time.monotonic() - t)
    elif mode == "bulk":                # arg bytes there and back
        data = os.urandom(int(arg))
        # sent from a thread: the echo fills our receive buffer while we still send
        threading.Thread(target=c.sendall, args=(data,), daemon=True).start()
        got = bytearray()
        while len(got) < len(data):
            chunk = c.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the peer")
            got += chunk
        out["same"] = bytes(got) == data
    elif mode == "hold":                # a byte each 50 ms for arg seconds, until it breaks
        end = time.monotonic() + arg
        while time.monotonic() < end:
            c.sendall(b"x")
            if c.recv(1) != b"x":
                raise ConnectionError("closed by the peer")
            time.sleep(0.05)
    out["ok"] = True
except Exception as exc:
    out.update(ok=False, err=type(exc).__name__)
print(json.dumps(out), flush=True)
"""


@pytest.fixture
def net():
    if WHY_NOT is not None:
        pytest.skip(f"fault harness unavailable: {WHY_NOT}")
    with FaultNet() as n:
        server = n.spawn(n.broker_ns, [sys.executable, "-c", ECHO], stdout=subprocess.PIPE,
                         text=True)
        assert server.stdout is not None and server.stdout.readline().strip() == "up"
        yield n


def probe(net: FaultNet, mode: str, arg: float, timeout: float = 60) -> dict:
    p = net.spawn(net.client_ns, [sys.executable, "-c", PROBE, mode, str(arg)],
                  stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=timeout)
    return json.loads(out)


def test_delay_and_partitions_both_ways(net: FaultNet) -> None:
    base = statistics.median(probe(net, "rtt", 20)["rtt"])
    net.set(delay_ms=100)
    slow = statistics.median(probe(net, "rtt", 10)["rtt"])
    assert 0.195 <= slow < base + 0.5, (base, slow)       # 100 ms each way
    net.set(delay_ms=0)
    for block in ("c2b", "b2c", "both"):
        net.set(block=block)
        before = net.counters()["blocked"]
        r = probe(net, "rtt", 1)
        assert r == {"ok": False, "err": "TimeoutError"}, (block, r)
        assert net.counters()["blocked"] > before, block
        net.set(block="none")
        assert probe(net, "rtt", 1)["ok"], f"the link did not heal after {block}"


def test_loss_duplicates_and_reordering_reach_tcp_and_tcp_recovers(net: FaultNet) -> None:
    net.set(delay_ms=20, jitter_ms=10, loss=0.1, dup=0.1, reorder=0.25)
    r = probe(net, "bulk", 500_000, timeout=120)
    assert r == {"same": True, "ok": True}, r
    c = net.counters()
    seen = c["forwarded"] + c["lost"]
    assert seen > 300 and 0.05 < c["lost"] / seen < 0.15, c
    assert 0.05 < c["duplicated"] / c["forwarded"] < 0.15, c
    assert c["reordered"] > 0.15 * c["forwarded"], c


def test_resets_break_established_connections(net: FaultNet) -> None:
    p = net.spawn(net.client_ns, [sys.executable, "-c", PROBE, "hold", "6"],
                  stdout=subprocess.PIPE, text=True)
    time.sleep(1.5)                    # connected and talking
    net.set(reset_s=1.0)
    out, _ = p.communicate(timeout=30)
    r = json.loads(out)
    assert r["ok"] is False and r["err"] in ("ConnectionResetError", "ConnectionError",
                                             "BrokenPipeError"), r
    assert net.counters()["resets"] > 0
    time.sleep(1.0)
    assert probe(net, "rtt", 1)["ok"], "connections work again after the resets"


@pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))
def test_namespaces_of_a_killed_run_are_swept_and_a_live_run_s_kept(tmp_path) -> None:
    """A run killed with SIGKILL never deletes its namespaces; the next one does, and leaves
    alone those whose owner still runs."""
    from tests.support.faultnet import sweep

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                     # a pid that is gone (not reused at once)
    names = {"dead": f"kcf-c-{dead.pid}-abc123", "alive": f"kcf-b-{os.getpid()}-abc123"}
    for ns in names.values():
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        gone = sweep()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert names["dead"] in gone and names["dead"] not in listed
        assert names["alive"] not in gone and names["alive"] in listed
    finally:
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
