"""The Redis store alone, one process: seconds and Redis script calls a batch for MESSAGES
messages in batches of 500 through ``append_batches`` + ``claim`` + ``ack``.

Workload: messages of a 16-byte key and a 100-byte value; a round appends 4 batches in one
``append_batches`` (as a puller appends), then claims and acks them (``claim(500)`` then
``ack(claim, claim.refs)``, as a sinker with a no-op handler), until all are acked. The
server is a redis-server of its own (on PATH, or $REDIS_SERVER) on a free port, AOF on
(``--appendfsync``), in a temp dir. Script calls are the server's own count (``INFO
commandstats``: evalsha and eval), less the appends'. It measures whichever ``kcodec`` is
on ``PYTHONPATH``, so one copy of this file compares two trees::

    PYTHONPATH=/path/to/tree python bench/bench_redis_store.py [--appendfsync everysec]

Not part of the test run; the numbers go into the commits that change the store.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Any

BATCH = 500
ROUND = 4       # batches an append_batches


def _messages(n: int, start: int) -> list:
    from kcodec.runtime.message import Message

    v = b"v" * 100
    return [Message("t", i % 4, i, 1_700_000_000_000 + i, 0, b"%016d" % i, v, [])
            for i in range(start, start + n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scripts(r: Any) -> int:
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def run(url: str, total: int) -> dict[str, float]:
    from kcodec.runtime.storage.redis import RedisStore

    prefix = f"bench:{uuid.uuid4().hex[:8]}"
    p = RedisStore(url, prefix, "p0")
    s = RedisStore(url, prefix, "s0")
    rounds = total // (BATCH * ROUND)
    s.backlog()                         # the counts made (once a process) before the clock
    p.backlog()
    before = _scripts(s.r)
    appending = sinking = 0.0
    got = 0
    for i in range(rounds):
        batches = [_messages(BATCH, (i * ROUND + j) * BATCH) for j in range(ROUND)]
        t = time.perf_counter()
        p.append_batches(batches)
        t2 = time.perf_counter()
        for _ in range(ROUND):
            c = s.claim(BATCH)
            assert c is not None
            got += len(c.messages)
            s.ack(c, c.refs)
        t3 = time.perf_counter()
        appending += t2 - t
        sinking += t3 - t2
    t = time.perf_counter()
    b = s.backlog()                     # applies an acknowledgement still owed
    sinking += time.perf_counter() - t
    calls = _scripts(s.r) - before - rounds       # less the appends
    assert got == rounds * ROUND * BATCH and b["processing"] == 0 and b["pending"] == 0, b
    p.close()
    s.close()
    return {"append_s": appending, "sink_s": sinking,
            "calls_per_batch": calls / (rounds * ROUND)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--appendfsync", default="everysec", choices=("always", "everysec", "no"))
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="kcodec-bench-redis-")
    port = _free_port()
    server = subprocess.Popen(
        [os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port), "--bind",
         "127.0.0.1", "--dir", d, "--appendonly", "yes", "--appendfsync", a.appendfsync,
         "--save", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        r = redis.Redis(port=port)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        out = [run(f"redis://127.0.0.1:{port}/0", a.messages) for _ in range(a.rounds)]
        sink = sorted(o["sink_s"] for o in out)
        app = sorted(o["append_s"] for o in out)
        calls = ", ".join(f"{o['calls_per_batch']:.3f}" for o in out)
        print(f"appendfsync={a.appendfsync} {a.messages:,} messages in batches of {BATCH}: "
              f"claim+ack median {sink[len(sink) // 2]:.2f} s (rounds: "
              f"{', '.join(f'{x:.2f}' for x in sink)}), append median "
              f"{app[len(app) // 2]:.2f} s, script calls a batch "
              f"{calls}; load "
              f"{os.getloadavg()[0]:.2f}")
    finally:
        server.kill()
        server.wait(10)
        shutil.rmtree(d, ignore_errors=True)
