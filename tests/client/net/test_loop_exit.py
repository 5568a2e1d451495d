"""A program that ends, or dies of an exception, with a producer or consumer still open
exits cleanly: no "Task was destroyed but it is pending!" from the client's loop thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest


@pytest.mark.parametrize("ending", ["raise RuntimeError('boom')", "pass"])
def test_an_open_client_at_exit_leaves_no_pending_task(ending: str) -> None:
    script = textwrap.dedent(f"""
        from kcodec.broker import Cluster
        from kcodec.client import Consumer, Producer
        c = Cluster(1).__enter__()
        c.create_topic("t", 2)
        p = Producer(bootstrap_servers=c.bootstrap, linger_ms=50)
        p.send("t", b"x", key=b"k").result(10)
        p.send("t", b"y")                       # still queued at exit
        con = Consumer("t", bootstrap_servers=c.bootstrap, group_id="g",
                       auto_offset_reset="earliest")
        con.poll(1.0)
        {ending}
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert "Task was destroyed" not in r.stderr, r.stderr
    assert "Exception ignored" not in r.stderr, r.stderr
    if ending.startswith("raise"):
        assert r.returncode == 1 and "RuntimeError: boom" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


def test_the_exit_handler_ends_every_task_of_every_loop_thread() -> None:
    """What runs at exit (atexit): each client loop thread cancels its tasks until none is
    left -- also one that swallows a first cancellation (asyncio.wait_for can, before
    Python 3.12) and one that starts another task on its way out -- and stops."""
    import asyncio

    from kcodec.client.net import loop as L

    lt = L.LoopThread("test-exit")
    started: list[str] = []

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            started.append("stubborn")
        await asyncio.sleep(3600)          # cancelled again, this time for good

    async def spawner() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            asyncio.get_running_loop().create_task(asyncio.sleep(3600))
            started.append("spawner")

    for coro in (stubborn(), spawner(), asyncio.sleep(3600)):
        lt.submit(coro)
    time.sleep(0.1)
    L._shutdown_all()
    assert not lt.alive
    assert asyncio.all_tasks(lt.loop) == set()
    assert sorted(started) == ["spawner", "stubborn"]
