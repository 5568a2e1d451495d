"""Operating ``kcodec run``: the HTTP health and readiness endpoint, and manual assignment
(``--assign``: given partitions, no group membership)."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
import uuid

from kcodec.client import Admin, TopicPartition
from kcodec.testing.net import free_port
from tests.runtime.support import Run, produce, wait_for


def probe(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, OSError):      # not listening (yet)
        return 0, {}


def test_health_and_readiness(kbroker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 20)
    port = free_port()
    r = Run(kbroker.bootstrap, topic, group, "--health-port", str(port), "--sinkers", "1")
    try:
        wait_for(lambda: probe(port, "/health")[0] == 200, 60, "/health", r.stderr)
        wait_for(lambda: probe(port, "/ready")[0] == 200, 60, "/ready", r.stderr)
        code, body = probe(port, "/ready")
        assert body == {"alive": True, "ready": True, "why": []}
        assert probe(port, "/nope")[0] == 404
        sinker = r.child_pids("sinker")[0]
        os.kill(sinker, signal.SIGKILL)
        seen: list[dict] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not seen:
            code, body = probe(port, "/ready")
            if code == 503:
                seen.append(body)
            time.sleep(0.02)
        assert seen and any("sinker 0 is not running" in w for w in seen[0]["why"]), seen
        assert probe(port, "/health")[0] == 200          # the master itself lives on
        wait_for(lambda: probe(port, "/ready")[0] == 200, 60, "ready again", r.stderr)
        assert r.stop() == 0
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()


def test_assign_reads_the_given_partitions_without_a_group(kbroker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 200)
    r = Run(kbroker.bootstrap, topic, group, "--storage", "direct", "--pullers", "2",
            "--assign", f"{topic}:0,{topic}:2")
    try:
        with Admin(bootstrap_servers=kbroker.bootstrap) as a:
            ends = a.list_offsets([TopicPartition(topic, p) for p in range(4)])
            want = {(topic, p, o) for p in (0, 2) for o in range(ends[TopicPartition(topic, p)])}
            wait_for(lambda: set(r.handled()) == want, 60, "partitions 0 and 2 handled",
                     r.stderr)

            def committed() -> dict:
                return a.committed_offsets(group, [topic])
            wait_for(lambda: committed() == {TopicPartition(topic, p): ends[TopicPartition(topic, p)]
                                             for p in (0, 2)}, 30, "0 and 2 committed", r.stderr)
            # no member joined: the group holds committed offsets only
            assert a.describe_groups([group])[0].members == []
        # each puller got one of the two
        pids = {int(line.split()[4]) for line in open(r.log)}
        assert len(pids) == 2
        assert r.stop() == 0, r.stderr()
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()
