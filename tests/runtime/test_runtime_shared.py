"""Two runtimes in one group sharing one Redis: the group splits the partitions between
their pullers, their sinkers share the queue, and killing one (kill -9: master and every
process it started) moves its partitions and its leased messages to the other with nothing
lost.

Each runtime runs in a network namespace of its own where the machine allows (``ip netns``,
as root: the broker and redis-server in a third one, joined by a bridge); else as plain
processes on loopback (the test says which in its id).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest

from kcodec.testing.net import accepts
from tests.runtime.support import ROOT, env, read_log, redis_binary, wait_for
from tests.runtime.test_runtime_chaos import done_log, expected

pytestmark = pytest.mark.slow

NS = ("kcr-srv", "kcr-a", "kcr-b")
SRV_IP, A_IP, B_IP = "10.213.77.1", "10.213.77.2", "10.213.77.3"


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


def _netns_down() -> None:
    for ns in NS:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _netns_up() -> None:
    _netns_down()
    for ns in NS:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
    _sh("ip", "-n", "kcr-srv", "link", "add", "br0", "type", "bridge")
    _sh("ip", "-n", "kcr-srv", "addr", "add", f"{SRV_IP}/24", "dev", "br0")
    _sh("ip", "-n", "kcr-srv", "link", "set", "br0", "up")
    for ns, ip in (("kcr-a", A_IP), ("kcr-b", B_IP)):
        _sh("ip", "link", "add", "kcr-tmp0", "type", "veth", "peer", "name", "kcr-tmp1")
        _sh("ip", "link", "set", "kcr-tmp0", "netns", ns)
        _sh("ip", "link", "set", "kcr-tmp1", "netns", "kcr-srv")
        _sh("ip", "-n", ns, "link", "set", "kcr-tmp0", "name", "eth0")
        _sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _sh("ip", "-n", ns, "link", "set", "eth0", "up")
        port = f"p-{ns}"
        _sh("ip", "-n", "kcr-srv", "link", "set", "kcr-tmp1", "name", port)
        _sh("ip", "-n", "kcr-srv", "link", "set", port, "master", "br0")
        _sh("ip", "-n", "kcr-srv", "link", "set", port, "up")


class Place:
    """Where processes run: a namespace (``prefix`` is ip netns exec) or here."""

    def __init__(self, netns: str | None) -> None:
        self.prefix = ["ip", "netns", "exec", netns] if netns else []

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(self.prefix + argv, env=env(**kw.pop("extra", {})), cwd=ROOT, **kw)


@pytest.fixture(params=["netns", "processes"])
def places(request) -> Iterator[tuple[str, Place, Place, Place]]:
    """(host the servers listen on, where the servers run, runtime A's place, B's place)."""
    if request.param == "netns":
        if os.geteuid() != 0 or shutil.which("ip") is None:
            pytest.skip("network namespaces need root and iproute2 (ip netns)")
        try:
            _netns_up()
        except (subprocess.CalledProcessError, OSError) as exc:
            _netns_down()
            pytest.skip(f"ip netns is not allowed here ({exc}); the processes variant runs")
        yield SRV_IP, Place("kcr-srv"), Place("kcr-a"), Place("kcr-b")
        _netns_down()
    else:
        yield "127.0.0.1", Place(None), Place(None), Place(None)


def _ns_accepts(place: Place, host: str, port: int) -> bool:
    if not place.prefix:
        return accepts(port, host)
    code = f"import socket; socket.create_connection(({host!r}, {port}), timeout=0.5)"
    return subprocess.run(place.prefix + [sys.executable, "-c", code], capture_output=True,
                          timeout=30).returncode == 0


def test_two_runtimes_share_one_redis(places) -> None:
    host, srv, pa, pb = places
    redis_binary()
    procs: list[subprocess.Popen] = []
    tmp = tempfile.mkdtemp(prefix="kcodec-shared-")
    bport, rport = 19000 + os.getpid() % 1000, 20000 + os.getpid() % 1000
    if not srv.prefix:
        from kcodec.testing.net import free_port

        bport, rport = free_port(), free_port()
    try:
        procs.append(srv.popen([sys.executable, "-m", "kcodec", "broker", "--host", host, "--port",
                                str(bport), "--partitions", "4",
                                # B's master dies with its children, so nobody removes B's
                                # member: its partitions move when its session times out,
                                # 10 s here rather than the consumer protocol's 45 s default
                                "--config", "group.consumer.session.timeout.ms=10000",
                                "--config", "group.consumer.min.session.timeout.ms=6000",
                                "--config", "group.consumer.heartbeat.interval.ms=2000",
                                "--config", "group.consumer.min.heartbeat.interval.ms=1000"],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL))
        procs.append(srv.popen(["redis-server", "--port", str(rport), "--bind", host, "--dir", tmp,
                                "--appendonly", "yes", "--save", "",
                                # the namespace is ours alone; loopback-only would refuse A and B
                                "--protected-mode", "no" if srv.prefix else "yes"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: _ns_accepts(pa, host, bport) and _ns_accepts(pa, host, rport), 30,
                 "broker and redis reachable from runtime A's place")
        boot, url = f"{host}:{bport}", f"redis://{host}:{rport}/0"
        topic, group, n = f"shared-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", 3000
        code = ("from tests.runtime.support import produce; import sys; "
                f"produce({boot!r}, {topic!r}, {n})")
        assert pa.popen([sys.executable, "-c", code]).wait(120) == 0
        log = os.path.join(tmp, "handled.log")
        runs = {}
        for name, place in (("a", pa), ("b", pb)):
            state = os.path.join(tmp, name)
            err = open(os.path.join(tmp, f"{name}.err"), "wb")
            runs[name] = (state, place.popen(
                [sys.executable, "-m", "kcodec", "run", "tests.runtime.handlers:record", "-t",
                 topic, "-g", group, "-b", boot, "--storage", "redis", "--redis-url", url,
                 "--state-dir", state, "--sinkers", "2", "--batch-size", "25",
                 "--lease-ms", "3000"],
                stdout=subprocess.DEVNULL, stderr=err,
                extra={"KCODEC_TEST_LOG": log, "KCODEC_TEST_MODE": "slow",
                       "KCODEC_TEST_SLEEP": "0.05"}))
            procs.append(runs[name][1])
        from kcodec.runtime.control import ask

        sock = os.path.join(runs["a"][0], "control.sock")

        def split() -> bool:
            m = ask(sock, "members")
            return len(m["members"]) == 2 and all(x["assignment"] for x in m["members"]) \
                and sum(x["ours"] for x in m["members"]) == 1
        wait_for(split, 60, "the partitions split between the two runtimes",
                 lambda: str(ask(sock, "members")))
        wait_for(lambda: len(read_log(log)) > 300, 60, "work under way")
        # kill -9 runtime B: its master and every process it started
        b_state = os.path.join(runs["b"][0], "control.sock")
        pids = [p["pid"] for p in ask(b_state, "status")["processes"] if p["pid"]]
        runs["b"][1].kill()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        want = expected(topic, n)

        def all_done() -> bool:
            seen = done_log(log)
            return all(seen.get(k, (0, False))[1] for k in want)
        wait_for(all_done, 120, "every record done by runtime A",
                 lambda: f"{sum(1 for k in want if not done_log(log).get(k, (0, 0))[1])} left; "
                         f"{ask(sock, 'backlog')} {ask(sock, 'members')}")

        def moved() -> bool:    # B's member is dropped once its session times out (10 s)
            m = ask(sock, "members")["members"]
            return len(m) == 1 and m[0]["ours"] and sorted(m[0]["assignment"].get(topic, [])) == \
                [0, 1, 2, 3]
        wait_for(moved, 60, "B's partitions moved to A", lambda: str(ask(sock, "members")))
        wait_for(lambda: sum(r["committed"] or 0 for r in ask(sock, "offsets")) == n, 60,
                 "A committed every partition to its end", lambda: str(ask(sock, "offsets")))
        wait_for(lambda: not any(v for k, v in ask(sock, "backlog").items() if k != "storage"),
                 60, "redis drained")
        seen = done_log(log)
        assert set(seen) == want
        dups = sum(c for c, _ok in seen.values()) - n
        print(f"shared redis ({'netns' if srv.prefix else 'processes'}): {n} records, "
              f"{dups} handled twice after the kill")
        assert dups <= 2 * 25 + 4 * 4 * 25     # B's sinkers' batches + B's pullers' uncommitted
        runs["a"][1].send_signal(signal.SIGTERM)
        assert runs["a"][1].wait(60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        time.sleep(0.2)
        if os.environ.get("KCODEC_KEEP_TMP"):
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
