"""A Redis that can lose acknowledged messages is refused at start (or warned about, by
choice), and one that came back empty is detected and logged by every process using it."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import uuid

import pytest

from kcodec.runtime.message import Message
from tests.runtime.support import ROOT, RedisServer, env

VOLATILE = ("--appendonly", "no", "--save", "")


@pytest.fixture(scope="module")
def volatile_redis():
    r = RedisServer(persistence=VOLATILE)
    yield r
    r.close()


def store(url: str, prefix: str | None = None):
    from kcodec.runtime.storage.redis import RedisStore

    return RedisStore(url, prefix or f"test:{uuid.uuid4().hex[:8]}", "p0", give_up_s=5)


def test_a_volatile_redis_is_refused_or_warned_about(volatile_redis, redis_server, caplog) -> None:
    st = store(volatile_redis.url)
    try:
        with pytest.raises(RuntimeError, match="no persistence at all .*appendonly yes"):
            st.check_durability(require=True)
        with caplog.at_level(logging.WARNING, "kcodec.runtime"):
            assert "--redis-durability warn" in st.check_durability(require=False)
        assert "loses messages whose offsets are already committed" in caplog.text
    finally:
        st.close()
    safe = store(redis_server.url)
    try:
        assert safe.check_durability(require=True) is None
    finally:
        safe.close()


def test_kcodec_run_refuses_a_volatile_redis_at_once(volatile_redis, kbroker, tmp_path) -> None:
    from tests.runtime.support import produce

    produce(kbroker.bootstrap, "volatile-t", 1)      # (kcodec run checks the topic first)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "kcodec", "run", "tests.runtime.handlers:record", "-t",
         "volatile-t", "-g", "g", "-b", kbroker.bootstrap, "--storage", "redis", "--redis-url",
         volatile_redis.url, "--state-dir", str(tmp_path)],
        env=env(), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 1, out.stderr
    assert "no persistence at all" in out.stderr and "Traceback" not in out.stderr
    assert time.monotonic() - t0 < 30


def test_a_redis_that_came_back_empty_is_detected(redis_server, caplog) -> None:
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    puller, sinker = store(redis_server.url, prefix), store(redis_server.url, prefix)
    try:
        puller.mark()
        sinker.check_epoch(force=True)
        puller.append([Message("t", 0, i, 0, 0, None, b"v", []) for i in range(10)])
        assert puller.check_epoch(force=True) and sinker.check_epoch(force=True)
        puller.r.flushall()          # what a restart without persistence leaves
        with caplog.at_level(logging.ERROR, "kcodec.runtime"):
            assert not sinker.check_epoch(force=True)
            assert not puller.check_epoch(force=True)     # (the sinker made a new marker)
            assert puller.check_epoch(force=True) and sinker.check_epoch(force=True)
        lines = [r for r in caplog.records if "came back without the runtime's data" in r.message]
        assert len(lines) == 2 and (puller.lost, sinker.lost) == (1, 1)
        # the check rides on the stores' own calls, about once a second
        puller.r.flushall()
        puller._epoch_at = 0.0
        puller.append([Message("t", 0, 99, 0, 0, None, b"v", [])])
        assert puller.lost == 2
    finally:
        puller.close()
        sinker.close()


def test_a_redis_emptied_while_the_runtime_was_stopped_is_told_at_the_next_start(
        redis_server, tmp_path, caplog) -> None:
    """The master notes the store's marker in its state dir: a start that finds it gone
    (Redis restarted without persistence, or was flushed, while nothing ran) logs the loss;
    a first start, and a start after a clean stop, do not."""
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    state = str(tmp_path / "state")

    def start() -> bool:
        s = store(redis_server.url, prefix)
        try:
            return s.check_stopped_loss(state)
        finally:
            s.close()
    with caplog.at_level(logging.ERROR, "kcodec.runtime"):
        assert start() and start()           # a first start; the marker kept since
        s = store(redis_server.url, prefix)
        s.r.delete(s.k_epoch, s.k_pending)   # what a Redis without persistence comes back as
        s.close()
        assert not start()
        assert start()                       # told once: the new marker is noted
        other = store(redis_server.url)      # another prefix from the same state dir: its own
        assert other.check_stopped_loss(state)
        other.close()
    lines = [r.message for r in caplog.records if "while the runtime was stopped" in r.message]
    assert len(lines) == 1 and state in lines[0], lines
