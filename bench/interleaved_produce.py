"""E-produce warm, kcodec against confluent-kafka (librdkafka), interleaved run by run on
one Tansu broker, with the CPU each side and the broker spent.

    python -m bench.interleaved_produce [ROUNDS] [-n N] [--codec none|lz4] [--pin]

Each round makes a fresh topic for each client, warms a producer on it (connected, producer
id fetched, one record acknowledged), then times N - 1 records (16-byte key, 100-byte value,
4 partitions) and the flush, kcodec and confluent-kafka taking turns (which goes first
alternates). Both sides use the same settings: acks=all, idempotence on, linger 5 ms,
librdkafka's default batch size (1,000,000 bytes) and in-flight limit (5), lz4 at level 1.

Per side: wall time (median, minimum), records/s, the CPU time of this process over the run
(all threads: the caller's and the client's own) and of the broker process, per record.
``--pin`` puts the broker on CPU 1 and this process on CPU 0, so the broker and the client
do not take turns on one core (2-core machine).

The ratio printed is confluent's median wall time ÷ kcodec's (> 1: kcodec faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from typing import Any

import confluent_kafka

from kcodec.client import Admin, Producer
from kcodec.testing.tansu import Tansu

PARTITIONS = 4
VALUE = (b'{"event":"click","user":"u00042","page":"/a/b/c","tag":"' + b"7" * 100)[:100]
LEVEL = {"none": None, "lz4": 1}
BATCH = 1_000_000        # librdkafka's batch.size default
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """utime + stime of a process (all its threads), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Side:
    def __init__(self, who: str, bootstrap: str, topic: str, codec: str) -> None:
        self.who, self.topic = who, topic
        if who == "kcodec":
            self.p: Any = Producer(bootstrap_servers=bootstrap, compression_type=codec,
                                   linger_ms=5, compression_level=LEVEL[codec], acks="all",
                                   batch_size=BATCH, max_in_flight_requests_per_connection=5)
            self.p.send(topic, VALUE, b"0" * 16).result(30)
        else:
            conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                    "acks": "all", "enable.idempotence": True, "batch.size": BATCH,
                    "queue.buffering.max.messages": 2_000_000}
            if LEVEL[codec] is not None:
                conf["compression.level"] = LEVEL[codec]
            self.p = confluent_kafka.Producer(conf)
            self.p.produce(topic, VALUE, b"0" * 16)
            assert self.p.flush(30) == 0

    def run(self, keys: list[bytes]) -> None:
        topic = self.topic
        if self.who == "kcodec":
            send = self.p.send
            for k in keys:
                send(topic, VALUE, k)
            self.p.flush()
        else:
            p = self.p
            produce = p.produce
            for k in keys:
                try:
                    produce(topic, VALUE, k)
                except BufferError:
                    p.poll(0.05)
                    produce(topic, VALUE, k)
            assert p.flush(120) == 0

    def close(self) -> None:
        if self.who == "kcodec":
            self.p.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", type=int, nargs="?", default=7)
    ap.add_argument("-n", type=int, default=300_000)
    ap.add_argument("--codec", default="none", choices=list(LEVEL))
    ap.add_argument("--pin", action="store_true")
    args = ap.parse_args()
    keys = [b"%016x" % (i * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(1, args.n)]
    stats: dict[str, dict[str, list[float]]] = {
        w: {"wall": [], "cpu": [], "broker": []} for w in ("kcodec", "confluent-kafka")}
    with Tansu() as broker:
        assert broker.proc is not None
        bpid = broker.proc.pid
        if args.pin:
            for task in os.listdir(f"/proc/{bpid}/task"):
                os.sched_setaffinity(int(task), {1})
            os.sched_setaffinity(0, {0})
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            for r in range(args.rounds):
                order = ["kcodec", "confluent-kafka"]
                if r % 2:
                    order.reverse()
                for who in order:
                    topic = f"bench-{uuid.uuid4().hex[:10]}"
                    assert admin.create_topics([topic], num_partitions=PARTITIONS)[topic] is None
                    side = Side(who, broker.bootstrap, topic, args.codec)
                    c0, b0, t0 = time.process_time(), proc_cpu(bpid), time.perf_counter()
                    side.run(keys)
                    t1, c1, b1 = time.perf_counter(), time.process_time(), proc_cpu(bpid)
                    side.close()
                    admin.delete_topics([topic])
                    s = stats[who]
                    s["wall"].append(t1 - t0)
                    s["cpu"].append(c1 - c0)
                    s["broker"].append(b1 - b0)
                    print(f"round {r} {who:16} {t1 - t0:6.3f} s  client CPU {c1 - c0:6.3f} s"
                          f"  broker CPU {b1 - b0:6.3f} s", flush=True)
    n = args.n - 1
    print(f"\nE-produce warm {args.codec}, {n} records, {args.rounds} rounds"
          f"{', pinned' if args.pin else ''} (load {os.getloadavg()[0]:.1f})")
    for who, s in stats.items():
        med = statistics.median(s["wall"])
        print(f"{who:16} median {med:6.3f} s (min {min(s['wall']):6.3f})  "
              f"{n / med / 1e6:5.2f} M msg/s  client CPU {statistics.median(s['cpu']) / n * 1e6:5.2f}"
              f" us/rec  broker CPU {statistics.median(s['broker']) / n * 1e6:5.2f} us/rec")
    k, c = stats["kcodec"]["wall"], stats["confluent-kafka"]["wall"]
    print(f"kcodec / confluent-kafka: {statistics.median(c) / statistics.median(k):.2f}x "
          f"by medians, {min(c) / min(k):.2f}x by minimums")


if __name__ == "__main__":
    main()
