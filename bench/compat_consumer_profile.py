"""Where an aiokafka consumer spends its time, stock and with kcodec.compat.aiokafka: wall
time and the consumer process's CPU time, interleaved rounds, optionally under cProfile.

    python bench/compat_consumer_profile.py [--records N] [--rounds R] [--broker tansu|kcodec]
                                            [--profile]

Loads N R-* records (lz4, 16 KiB batches, one partition) into a fresh broker (Tansu, or
``kcodec broker`` in its own process), then reads them all R times with each consumer,
alternating, and prints one line per read. CPU time well below wall time means the consumer
waits for the broker; --profile prints the top functions of the consumer by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import pstats
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.conftest import workload_records  # noqa: E402

RECORDS = workload_records()


def _touch(records: Any) -> int:
    n = 0
    for r in records:
        r.offset  # noqa: B018
        r.timestamp  # noqa: B018
        r.key  # noqa: B018
        r.value  # noqa: B018
        for h in r.headers:
            h[0]  # noqa: B018
            h[1]  # noqa: B018
        n += 1
    return n


async def _read(bootstrap: str, topic: str, n: int) -> int:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_wait_ms=50,
                         max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    await c.start()
    try:
        c.assign([TopicPartition(topic, 0)])
        got = 0
        while got < n:
            for rs in (await c.getmany(timeout_ms=500, max_records=100000)).values():
                got += _touch(rs)
        return got
    finally:
        await c.stop()


@contextlib.contextmanager
def _kcodec_broker() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--json"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["bootstrap"]
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def _tansu() -> Iterator[str]:
    from kcodec.client._tansu import Tansu

    with Tansu() as broker:
        yield broker.bootstrap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--broker", choices=["tansu", "kcodec"], default="tansu")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import kcodec.compat.aiokafka as adapter
    from kcodec.client import Admin, Producer

    with (_tansu() if args.broker == "tansu" else _kcodec_broker()) as bootstrap:
        topic = "profile"
        with Admin(bootstrap_servers=bootstrap) as a:
            a.create_topics([topic], num_partitions=1)
        with Producer(bootstrap_servers=bootstrap, compression_type="lz4", linger_ms=20,
                      batch_size=16384) as p:
            for i in range(args.records):
                r = RECORDS[i % len(RECORDS)]
                p.send(topic, r.value, key=r.key, headers=r.headers, timestamp=r.timestamp,
                       partition=0)
            p.flush()
        for _ in range(args.rounds):
            for name in ("aiokafka C", "kcodec"):
                if name == "kcodec":
                    adapter.install()
                prof = cProfile.Profile() if args.profile else None
                wall, cpu = time.perf_counter(), time.process_time()
                if prof is not None:
                    prof.enable()
                n = asyncio.run(_read(bootstrap, topic, args.records))
                if prof is not None:
                    prof.disable()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                adapter.uninstall()
                print(f"{name:10s} {n} records  {wall:6.2f} s wall  {cpu:6.2f} s CPU  "
                      f"{n / wall:9,.0f} rec/s", flush=True)
                if prof is not None:
                    out = io.StringIO()
                    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
                    print(out.getvalue())


if __name__ == "__main__":
    main()
