"""The Python floor under bench.latency: each side raw (a socket, no client) or a kcodec client.

    python -m bench.latency_floor                          # the four blocking pairs
    python -m bench.latency_floor --pairs raw/raw,async/raw,raw/async --rounds 2

One producer process sends records of 100 bytes at 1,000/s (``acks=all``, one partition,
``kcodec broker`` in a process of its own) and one consumer process reads them; the e2e
latency is taken from each record's intended send time, as in bench.latency. A side is:

    raw       a blocking socket: the producer sends a one-record Produce and reads its
              answer before the next; the consumer sends a long-polling Fetch (500 ms,
              min_bytes 1) and sends the next as soon as one is answered. No library but
              kcodec's codec, no event loop, no second thread.
    kcodec    kcodec's Producer / Consumer (a loop thread and the caller's)
    async     kcodec's AsyncProducer / AsyncConsumer (one asyncio loop)

raw/raw is what any Python producer and consumer pay on this machine and broker; a pair
with one side raw shows what the other side's client adds. The first second is left out.
How it was read: bench/notes/2026-12-07-latency-floor.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

ns = time.monotonic_ns
RATE = 1000


def _connect(boot: str) -> tuple[socket.socket, Any]:
    host, port = boot.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, s.makefile("rb")


def _value(intended: int) -> bytes:
    return intended.to_bytes(8, "big") + b"v" * 92


def _intended(t0: int, i: int) -> int:
    return t0 + i * 1_000_000_000 // RATE


def produce(kind: str, boot: str, topic: str, n: int, t0: int) -> None:
    if kind == "raw":
        from kcodec.protocol import ProduceRequest as P
        from kcodec.protocol import encode_request
        from kcodec.records import RecordBatchBuilder

        s, f = _connect(boot)
        for i in range(n):
            it = _intended(t0, i)
            if (w := (it - ns()) / 1e9) > 0:
                time.sleep(w)
            b = RecordBatchBuilder(compression=0)
            b.append(None, _value(it), [], int(time.time() * 1000))
            s.sendall(encode_request(P(acks=-1, timeout_ms=30000, topic_data=[
                P.TopicProduceData(name=topic, partition_data=[
                    P.PartitionProduceData(index=0, records=b.build())])]), 9, i + 1))
            (size,) = struct.unpack(">i", f.read(4))
            f.read(size)
        s.close()
    elif kind == "kcodec":
        from kcodec.client import Producer

        with Producer(bootstrap_servers=boot, acks="all", linger_ms=0) as p:
            p.send(topic, b"w" * 100).result(30)       # connected, metadata known
            for i in range(n):
                it = _intended(t0, i)
                if (w := (it - ns()) / 1e9) > 0:
                    time.sleep(w)
                p.send(topic, _value(it))
            p.flush()
    elif kind == "async":
        from kcodec.client import AsyncProducer

        async def run() -> None:
            async with AsyncProducer(bootstrap_servers=boot, acks="all", linger_ms=0) as p:
                await (await p.send(topic, b"w" * 100))
                for i in range(n):
                    it = _intended(t0, i)
                    if (w := (it - ns()) / 1e9) > 0:
                        await asyncio.sleep(w)
                    await p.send(topic, _value(it))
                await p.flush()
        asyncio.run(run())
    else:
        raise SystemExit(f"unknown producer side {kind!r}")


def consume(kind: str, boot: str, topic: str, n: int) -> list[int]:
    lat: list[int] = []

    def seen(v: bytes, now: int) -> None:
        if v[:1] != b"w":           # not the producer's first record
            lat.append(now - int.from_bytes(v[:8], "big"))

    if kind == "raw":
        from kcodec.protocol import FetchRequest as F
        from kcodec.protocol import decode_response, encode_request
        from kcodec.records import iter_batches

        s, f = _connect(boot)
        offset, cid = 0, 0
        print("ready", flush=True)
        while len(lat) < n:
            cid += 1
            req = F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                    isolation_level=0, topics=[F.FetchTopic(topic=topic, partitions=[
                        F.FetchPartition(partition=0, fetch_offset=offset,
                                         partition_max_bytes=1 << 20)])])
            s.sendall(encode_request(req, 11, cid))
            (size,) = struct.unpack(">i", f.read(4))
            body = f.read(size)
            now = ns()
            records = decode_response(body, F.API_KEY, 11, cid)[1].responses[0] \
                .partitions[0].records
            for batch in iter_batches(records or b""):
                for r in batch:
                    seen(r.value, now)
                    offset = r.offset + 1
        s.close()
    elif kind == "kcodec":
        from kcodec.client import Consumer, TopicPartition

        with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0)])
            c.poll(0.05)
            print("ready", flush=True)
            while len(lat) < n:
                for recs in c.poll(0.1).values():
                    now = ns()
                    for r in recs:
                        seen(r.value, now)
    elif kind == "async":
        from kcodec.client import AsyncConsumer, TopicPartition

        async def run() -> None:
            async with AsyncConsumer(bootstrap_servers=boot,
                                     auto_offset_reset="earliest") as c:
                c.assign([TopicPartition(topic, 0)])
                await c.poll(0.05)
                print("ready", flush=True)
                while len(lat) < n:
                    for recs in (await c.poll(0.1)).values():
                        now = ns()
                        for r in recs:
                            seen(r.value, now)
        asyncio.run(run())
    else:
        raise SystemExit(f"unknown consumer side {kind!r}")
    return lat


def pair(boot: str, producer: str, consumer: str, seconds: float) -> str:
    from kcodec.client import Admin

    n = int(RATE * seconds)
    topic = f"floor-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=boot) as a:
        a.create_topics([topic], 1, 1)
    c = subprocess.Popen([sys.executable, "-m", "bench.latency_floor", "--consumer", consumer,
                          "--bootstrap", boot, "--topic", topic, "--count", str(n)],
                         stdout=subprocess.PIPE, text=True)
    assert c.stdout is not None
    if c.stdout.readline().strip() != "ready":
        raise RuntimeError("the consumer process did not start")
    produce(producer, boot, topic, n, ns() + 50_000_000)
    lat = sorted(json.loads(c.stdout.readline())[RATE:])     # the first second left out
    c.wait(30)

    def q(x: float) -> float:
        return lat[min(len(lat) - 1, int(x * len(lat)))] / 1e6
    return (f"{producer:7s} {consumer:7s} e2e p50 {q(.5):6.3f}  p90 {q(.9):6.3f}  "
            f"p99 {q(.99):6.3f}  p99.9 {q(.999):6.3f}  max {lat[-1] / 1e6:6.3f} ms")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", default="raw/raw,kcodec/raw,raw/kcodec,kcodec/kcodec",
                    help="producer/consumer sides, comma-separated (raw, kcodec, async)")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--consumer", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.consumer:       # the consumer process of one pair
        print(json.dumps(consume(args.consumer, args.bootstrap, args.topic, args.count)),
              flush=True)
        return
    from bench.test_bench_broker import KcodecBrokerProcess

    pairs = [p.split("/") for p in args.pairs.split(",")]
    broker = KcodecBrokerProcess(disk=False)
    try:
        print("producer consumer, ms from the intended send time")
        for _ in range(args.rounds):
            for prod, cons in pairs:
                print(pair(broker.bootstrap, prod, cons, args.seconds), flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
