"""Where an aiokafka consumer spends its time, stock and with kcodec.compat.aiokafka: wall
time and the consumer process's CPU time, interleaved rounds, optionally under cProfile.

    python bench/compat_consumer_profile.py [--records N] [--rounds R] [--broker tansu|kcodec]
                                            [--profile] [--producer CODEC]

Loads N R-* records (lz4, 16 KiB batches, one partition) into a fresh broker (Tansu, or
``kcodec broker`` in its own process), then reads them all R times with each consumer,
alternating, and prints one line per read. CPU time well below wall time means the consumer
waits for the broker; --profile prints the top functions of the consumer by own time.

``--producer CODEC``: the same for an aiokafka producer sending N records (CODEC: none,
gzip, snappy, lz4, zstd; 16 KiB batches) and waiting for every acknowledgement; with
--profile it also prints the codec's share: the time inside aiokafka's ``BatchBuilder.append``
(the record builder's append) and ``BatchBuilder._build`` (build and compression), of the
producer's profiled total.
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


async def _produce(bootstrap: str, topic: str, n: int, codec: str) -> int:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=16384,
                         compression_type=None if codec == "none" else codec)
    await p.start()
    try:
        futures = []
        for i in range(n):
            r = RECORDS[i % len(RECORDS)]
            futures.append(await p.send(topic, r.value, key=r.key, headers=r.headers,
                                        timestamp_ms=r.timestamp, partition=0))
        await asyncio.gather(*futures)
        return len(futures)
    finally:
        await p.stop()


def _codec_share(prof: cProfile.Profile) -> str:
    """The builder's append and build time (cumulative) against the whole profile."""
    import inspect

    from aiokafka.producer.message_accumulator import BatchBuilder

    wanted = {inspect.getsourcelines(f)[1] for f in (BatchBuilder.append, BatchBuilder._build)}
    stats = pstats.Stats(prof)
    codec = sum(row[3] for (path, line, _), row in stats.stats.items()  # type: ignore[attr-defined]
                if path.endswith("message_accumulator.py") and line in wanted)
    total = stats.total_tt  # type: ignore[attr-defined]
    return f"codec (BatchBuilder.append + _build) {codec:.2f} s of {total:.2f} s profiled"


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
    from kcodec.testing.tansu import Tansu

    with Tansu() as broker:
        yield broker.bootstrap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--broker", choices=["tansu", "kcodec"], default="tansu")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--producer", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    args = ap.parse_args()

    import kcodec.compat.aiokafka as adapter
    from kcodec.client import Admin, Producer

    with (_tansu() if args.broker == "tansu" else _kcodec_broker()) as bootstrap:
        topic = "profile"
        with Admin(bootstrap_servers=bootstrap) as a:
            a.create_topics([topic], num_partitions=1)
        if args.producer:
            _producer_rounds(args, adapter, bootstrap, topic)
            return
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


def _producer_rounds(args: Any, adapter: Any, bootstrap: str, topic: str) -> None:
    for _ in range(args.rounds):
        for name in ("aiokafka C", "kcodec"):
            if name == "kcodec":
                adapter.install()
            prof = cProfile.Profile() if args.profile else None
            wall, cpu = time.perf_counter(), time.process_time()
            if prof is not None:
                prof.enable()
            n = asyncio.run(_produce(bootstrap, topic, args.records, args.producer))
            if prof is not None:
                prof.disable()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            adapter.uninstall()
            print(f"{name:10s} produce {args.producer} {n} records  {wall:6.2f} s wall  "
                  f"{cpu:6.2f} s CPU  {n / wall:9,.0f} rec/s", flush=True)
            if prof is not None:
                print("  " + _codec_share(prof))
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(8)
                print(out.getvalue())


if __name__ == "__main__":
    main()
