"""``kcodec ctl`` tells the truth whether or not the runtime runs: lag is the group's over
every partition of its topics plus the store's backlog; the store's questions (backlog,
failed, requeue, clear) are answered by the store itself once the runtime has stopped; a
store that cannot be reached is a one-line error within seconds."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from kcodec.runtime.config import Settings
from kcodec.runtime.control import write_description
from kcodec.runtime.message import Message
from kcodec.runtime.storage import open_store
from kcodec.testing.net import free_port
from tests.runtime.support import ROOT, env, produce


def ctl(*argv: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcodec", "ctl", *argv],
                          env=env(**(extra_env or {})), capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def answer(*argv: str, extra_env: dict | None = None) -> Any:
    out = ctl("--json", *argv, extra_env=extra_env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def msgs(n: int, start: int = 0) -> list[Message]:
    return [Message("t", 0, i, 0, 0, None, b"v%d" % i, []) for i in range(start, start + n)]


def stopped_runtime(tmp_path, storage: str, redis_url: str = "", **kw: Any) -> Settings:
    """The state a stopped runtime leaves: its description, a store holding 5 pending
    messages and 2 failed ones."""
    s = Settings.build(env={}, overrides={
        "topics": kw.pop("topics", ["t"]), "group": kw.pop("group", "g"),
        "state_dir": str(tmp_path), "storage": storage,
        "redis_url": redis_url or "redis://127.0.0.1:6379/0",
        "redis_prefix": f"test:{uuid.uuid4().hex[:8]}", **kw})
    write_description(s)
    st = open_store(s, "p0")
    st.append(msgs(5))
    st.fail([m._replace(attempts=4, error="boom") for m in msgs(2, 100)])
    st.close()
    return s


@pytest.mark.parametrize("storage", ["file", "redis"])
def test_store_questions_without_a_runtime(tmp_path, storage, request) -> None:
    url = request.getfixturevalue("redis_server").url if storage == "redis" else ""
    stopped_runtime(tmp_path, storage, url)
    d = ("--state-dir", str(tmp_path))
    assert answer("backlog", *d) == {"storage": storage, "pending": 5, "delayed": 0,
                                     "processing": 0, "failed": 2}
    failed = answer("failed", *d)
    assert [(m["offset"], m["attempts"], m["error"]) for m in failed] == \
        [(100, 4, "boom"), (101, 4, "boom")]
    assert answer("requeue", *d) == {"requeued": 2}
    assert answer("backlog", *d)["pending"] == 7
    assert answer("clear", *d) == {"cleared": 0}
    out = ctl("backlog", *d)
    assert out.returncode == 0 and "pending" in out.stdout.lower()


def test_a_redis_password_is_never_written_and_must_be_given(tmp_path, redis_server) -> None:
    url = redis_server.url.replace("redis://", "redis://:pw@")
    s = Settings.build(env={}, overrides={"topics": ["t"], "group": "g",
                                          "state_dir": str(tmp_path), "storage": "redis",
                                          "redis_url": url})
    write_description(s)
    assert ":pw@" not in (tmp_path / "runtime.json").read_text()
    out = ctl("backlog", "--state-dir", str(tmp_path))
    assert out.returncode == 2 and "--redis-url" in out.stderr    # a setting missing


def test_an_unreachable_redis_is_a_clear_error_within_seconds(tmp_path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"      # nothing listens there
    t0 = time.monotonic()
    out = ctl("backlog", "--state-dir", str(tmp_path), "--storage", "redis", "--redis-url", url)
    took = time.monotonic() - t0
    assert out.returncode == 1, out.stdout
    assert "unreachable" in out.stderr and f"127.0.0.1:{url.split(':')[2]}" in out.stderr
    assert "Traceback" not in out.stderr and took < 15, (took, out.stderr)


def test_lag_counts_every_partition_and_the_store(tmp_path, kbroker) -> None:
    topic, group = f"lag-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 100)
    from kcodec.client import Admin, TopicPartition

    with Admin(bootstrap_servers=kbroker.bootstrap) as a:     # the group is 10 records in
        a.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 10})
    stopped_runtime(tmp_path, "file", topics=[topic], group=group, bootstrap=kbroker.bootstrap)
    lag = answer("lag", "--state-dir", str(tmp_path))
    assert (lag["kafka"], lag["store"], lag["total"]) == (90, 5, 95)
    assert [(p["partition"], p["committed"]) for p in lag["partitions"]] == \
        [(0, 10), (1, None), (2, None), (3, None)]
    rows = answer("offsets", "--state-dir", str(tmp_path))
    assert sum(r["end"] for r in rows) == 100 and sum(r["lag"] for r in rows) == 90
    out = ctl("lag", "--state-dir", str(tmp_path))
    assert out.returncode == 0 and "95 = 90 in Kafka + 5 in the store" in out.stdout, out.stdout


def test_a_running_runtimes_store_questions_with_redis_down_are_a_clear_error(kbroker) -> None:
    """With the runtime running and its Redis killed, ctl's store questions are answered
    with the error (Redis unreachable) within seconds, and the master logs no traceback;
    once Redis is back the same question is answered again."""
    from tests.runtime.support import RedisServer, Run

    redis = RedisServer()
    topic, group = f"down-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 50)
    r = Run(kbroker.bootstrap, topic, group, "--storage", "redis", "--redis-url", redis.url,
            "--redis-prefix", f"p-{uuid.uuid4().hex[:8]}",
            extra_env={"KCODEC_RUN_CLIENT_GROUP_PROTOCOL": "classic"})
    try:
        r.wait_ready()
        assert answer("backlog", "--state-dir", r.state_dir)["failed"] == 0
        redis.kill()
        t0 = time.monotonic()
        out = ctl("backlog", "--state-dir", r.state_dir)
        took = time.monotonic() - t0
        assert out.returncode == 1, (out.stdout, out.stderr)
        assert "unreachable" in out.stderr and str(redis.port) in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and took < 10, (took, out.stderr)
        redis.start()
        deadline = time.monotonic() + 20
        while True:
            out = ctl("--json", "backlog", "--state-dir", r.state_dir)
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert out.returncode == 0, out.stderr
        err = r.stderr()
        assert "Traceback" not in err and "BrokenPipe" not in err, err[-3000:]
    finally:
        r.kill_all()
        redis.close()
