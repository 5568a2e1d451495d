"""Share groups (KIP-932) through kcodec's broker: kcodec's ShareConsumer vs
confluent-kafka's ShareConsumer on the same broker, side by side in one run.

    S-share     N records (16-byte key, 100-byte value, lz4, 4 partitions, produced once by
                confluent-kafka) consumed by one share consumer of a fresh share group
                (share.auto.offset.reset=earliest, set with IncrementalAlterConfigs on the
                GROUP resource), implicit acknowledgement; time from subscribe until the
                application holds all N records (then each consumer commits and closes,
                untimed). Entries:
                  kcodec cython       ShareConsumer.poll(): one ShareRecord per record
                  kcodec columns      ShareConsumer.poll_columns(): RecordColumns per range
                  kcodec async        AsyncShareConsumer.poll() on its own event loop
                  confluent-kafka     ShareConsumer.poll() (librdkafka's preview)

The broker is one ``kcodec broker`` process (memory) on loopback. The target is kcodec
>= 1.5x confluent-kafka (records/s). Rounds interleave the entries
(KCODEC_BENCH_SHARE_ROUNDS, default 3); N = KCODEC_BENCH_SHARE_RECORDS (default 1,000,000).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from bench.conftest import Row

ck = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin as ca  # noqa: E402

N = int(os.environ.get("KCODEC_BENCH_SHARE_RECORDS", "1000000"))
ROUNDS = int(os.environ.get("KCODEC_BENCH_SHARE_ROUNDS", "3"))
PARTITIONS = 4
TOPIC = "share-bench"
VALUE = (b'{"event":"click","user":"u00042","page":"/a/b/c","tag":"' + b"7" * 100)[:100]


@pytest.fixture(scope="module")
def broker():
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--json"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    bootstrap = json.loads(proc.stdout.readline())["bootstrap"]
    admin = ca.AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([ca.NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(30)
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4",
                     "batch.num.messages": 10000, "queue.buffering.max.messages": 2_000_000})
    for i in range(N):
        p.produce(TOPIC, VALUE, b"%016x" % (i * 0x9E3779B97F4A7C15 % (1 << 64)))
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    yield bootstrap, admin
    proc.terminate()
    proc.wait(30)


_groups = iter(range(1_000_000))


def fresh_group(admin) -> str:
    group = f"bench-{next(_groups)}"
    r = ca.ConfigResource(ca.ResourceType.GROUP, group, incremental_configs=[ca.ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=ca.AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([r]).values():
        f.result(30)
    return group


def kcodec_poll(bootstrap: str, group: str) -> float:
    from kcodec.client import ShareConsumer

    t0 = time.perf_counter()
    c = ShareConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group)
    n = 0
    while n < N:
        n += len(c.poll(1.0))
    dt = time.perf_counter() - t0
    c.commit_sync()
    c.close()
    assert n == N
    return dt


def kcodec_columns(bootstrap: str, group: str) -> float:
    from kcodec.client import ShareConsumer

    t0 = time.perf_counter()
    c = ShareConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group)
    n = 0
    while n < N:
        n += sum(len(x) for x in c.poll_columns(1.0))
    dt = time.perf_counter() - t0
    c.commit_sync()
    c.close()
    assert n == N
    return dt


def kcodec_async(bootstrap: str, group: str) -> float:
    from kcodec.client import AsyncShareConsumer

    async def go() -> float:
        t0 = time.perf_counter()
        c = AsyncShareConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group)
        await c.start()
        n = 0
        while n < N:
            n += len(await c.poll(1.0))
        dt = time.perf_counter() - t0
        await c.commit_sync()
        await c.close()
        assert n == N
        return dt
    return asyncio.run(go())


def confluent(bootstrap: str, group: str) -> float:
    t0 = time.perf_counter()
    c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    c.subscribe([TOPIC])
    n = 0
    while n < N:
        for m in c.poll(1.0):
            if m.error() is None:
                n += 1
    dt = time.perf_counter() - t0
    c.commit_sync()
    c.close()
    assert n == N
    return dt


ENTRIES = {"kcodec cython": kcodec_poll, "kcodec columns": kcodec_columns,
           "kcodec async": kcodec_async, "confluent-kafka": confluent}


def test_share_consume(benchmark, broker, ratios):
    bootstrap, admin = broker
    times: dict[str, list[float]] = {name: [] for name in ENTRIES}

    def interleaved() -> None:                  # the machine's load hits every entry
        for _ in range(ROUNDS):
            for name, run in ENTRIES.items():
                times[name].append(run(bootstrap, fresh_group(admin)))
    benchmark.pedantic(interleaved, rounds=1, iterations=1)
    workload = f"S-share ({N} records, 4 partitions, lz4, implicit acknowledgement)"
    for name, ts in times.items():
        ts.sort()
        ratios.rows.append(Row(workload, name, ts[len(ts) // 2], ts[0], N, "msg"))
    med = {name: ts[len(ts) // 2] for name, ts in times.items()}
    lines = [f"{name}: {N / t:,.0f} records/s (median of {ROUNDS}), "
             f"{med['confluent-kafka'] / t:.2f}x confluent-kafka" for name, t in med.items()]
    print("\n" + "\n".join(lines))
