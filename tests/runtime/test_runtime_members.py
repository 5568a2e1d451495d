"""A puller killed with -9 does not hold its partitions until its session times out: the
master removes its member from the group on its behalf (LeaveGroup for the classic protocol,
a heartbeat at epoch -1 for the consumer protocol), and its partitions move in about a
second."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from kcodec.client import Admin
from tests.runtime.support import Run, produce, wait_for


def members(bootstrap: str, group: str) -> dict[str, list[int]]:
    with Admin(bootstrap_servers=bootstrap) as a:
        d = a.describe_groups([group])[0]
    return {m.member_id: sorted(p for ps in m.assignment.values() for p in ps)
            for m in d.members}


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_killed_pullers_member_is_removed_at_once(kbroker, protocol) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 40)
    r = Run(kbroker.bootstrap, topic, group, "--storage", "direct", "--pullers", "2",
            extra_env={"KCODEC_RUN_CLIENT_GROUP_PROTOCOL": protocol})
    try:
        r.wait_ready()

        def split() -> bool:
            m = members(kbroker.bootstrap, group)
            return len(m) == 2 and all(m.values())
        wait_for(split, 60, "two members sharing the partitions", r.stderr)
        before = members(kbroker.bootstrap, group)
        victim = r.child_pids("puller")[0]
        noted = {}
        for slot in (0, 1):
            with open(os.path.join(r.state_dir, "members", f"puller-{slot}.json")) as f:
                import json
                got = json.load(f)
            noted[got["pid"]] = got["member_id"]
        dead = noted[victim]
        assert dead in before
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        wait_for(lambda: dead not in members(kbroker.bootstrap, group), 30,
                 "the killed puller's member gone", r.stderr)
        took = time.monotonic() - t0
        # the session timeouts are 45 s (consumer protocol) and 10 s (classic) here
        assert took < 5, (took, r.stderr())
        # the master logs it once its Admin call is answered, which can be just after the
        # group shows the member gone
        wait_for(lambda: "left group" in r.stderr() and "on its behalf" in r.stderr(), 10,
                 "the master saying it removed the member", r.stderr)
        assert r.stop() == 0, r.stderr()
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()


def test_pullers_settle_together_before_fetching(kbroker) -> None:
    """Under the consumer protocol a new group's second member gets its share a heartbeat
    or two after the first: without waiting, the first read every partition meanwhile."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 2000)
    r = Run(kbroker.bootstrap, topic, group, "--storage", "direct", "--pullers", "2")
    try:
        wait_for(lambda: len(r.handled()) == 2000, 90, "every record handled", r.stderr)
        by_pid: dict[int, set[int]] = {}
        for line in open(r.log):
            parts = line.split()
            by_pid.setdefault(int(parts[4]), set()).add(int(parts[1]))
        # both pullers worked, each on partitions of its own
        assert len(by_pid) == 2, by_pid
        a, b = by_pid.values()
        assert a and b and not a & b, by_pid
        assert r.stop() == 0, r.stderr()
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()


def test_more_pullers_than_partitions_is_warned_about(kbroker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 10, partitions=1)
    r = Run(kbroker.bootstrap, topic, group, "--storage", "direct", "--pullers", "2")
    try:
        wait_for(lambda: len(r.handled()) == 10, 60, "every record handled", r.stderr)
        wait_for(lambda: "2 pullers for 1 partitions" in r.stderr(), 30, "the warning",
                 r.stderr)
        assert r.stop() == 0, r.stderr()
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()


def test_the_consumer_protocols_session_timeout_is_the_groups_config(kbroker, tmp_path) -> None:
    import subprocess
    import sys

    from tests.runtime.support import ROOT, env

    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 10)
    r = Run(kbroker.bootstrap, topic, group, "--storage", "direct",
            "--group-session-timeout-ms", "50000")
    try:
        wait_for(lambda: len(r.handled()) == 10, 60, "every record handled", r.stderr)
        with Admin(bootstrap_servers=kbroker.bootstrap) as a:
            got = a.describe_configs([("group", group)])
        entries = {n: e.value for es in got.values() for n, e in es.items()}
        assert entries["consumer.session.timeout.ms"] == "50000"
        assert r.stop() == 0, r.stderr()
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()
    # below the broker's group.consumer.min.session.timeout.ms: refused, said at start
    out = subprocess.run([sys.executable, "-m", "kcodec", "run", "tests.runtime.handlers:record",
                          "-t", topic, "-g", group, "-b", kbroker.bootstrap, "--storage",
                          "direct", "--state-dir", str(tmp_path), "--group-session-timeout-ms",
                          "10000"], env=env(), capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 1, out.stderr
    assert "--group-session-timeout-ms 10000: the broker refused" in out.stderr
    assert "Traceback" not in out.stderr
