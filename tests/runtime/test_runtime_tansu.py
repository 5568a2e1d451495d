"""``kcodec run`` against Tansu (another Kafka-compatible broker, the tests' ``broker``
fixture): every record handled through the file store by two pullers, ctl lag truthful
across the group's partitions, and a killed puller's member removed by the master."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest

from kcodec.client import Admin
from tests.runtime.support import Run, produce, wait_for

pytestmark = pytest.mark.slow


def test_kcodec_run_on_tansu(broker) -> None:
    boot = broker.bootstrap
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(boot, topic, 400)
    r = Run(boot, topic, group, "--storage", "file", "--pullers", "2", "--sinkers", "1",
            extra_env={"KCODEC_RUN_CLIENT_GROUP_PROTOCOL": "classic"})
    try:
        wait_for(lambda: len(r.handled()) >= 400, 120, "every record handled", r.stderr)
        assert len(r.handled()) == 400 and max(r.handled().values()) == 1

        def drained() -> bool:
            lag = r.ctl("lag")
            return lag["total"] == 0 and len(lag["partitions"]) == 4
        wait_for(drained, 60, "lag 0 over 4 partitions", lambda: r.ctl("lag"))
        produce(boot, topic, 40, start=400)
        wait_for(lambda: len(r.handled()) == 440, 60, "the next 40", r.stderr)

        def members() -> set[str]:
            with Admin(bootstrap_servers=boot) as a:
                return {m.member_id for m in a.describe_groups([group])[0].members}
        wait_for(lambda: len(members()) == 2, 60, "two members", r.stderr)
        victim = r.child_pids("puller")[0]
        noted = {}
        for slot in (0, 1):
            with open(os.path.join(r.state_dir, "members", f"puller-{slot}.json")) as f:
                got = json.load(f)
            noted[got["pid"]] = got["member_id"]
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        wait_for(lambda: noted[victim] not in members(), 30, "the killed member gone", r.stderr)
        assert time.monotonic() - t0 < 8, r.stderr()
        assert r.stop() == 0, r.stderr()
    finally:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()
