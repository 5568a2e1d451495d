"""The cost of each metrics hook per call, and what it adds per record at the batch sizes
E-produce and E-consume run with (the end-to-end runs of bench/observe_cost.py are too noisy
on a shared machine to see a 1 % difference; this measures the hooks themselves).

    python -m bench.observe_hooks

Per hook: ns per call (best of 7 timeit runs). Then per record: the hooks one Produce
request of B records in P batches runs, divided by B (and the same for one Fetch and one
poll), next to a send's own cost measured here too (a keyed send to an in-memory
accumulator with nothing sent: the floor of E-produce's per-record work).
"""

from __future__ import annotations

import asyncio
import timeit

from kcodec.client.metrics import ClientMetrics
from kcodec.client.structs import TopicPartition


def per_call(stmt, number: int = 20000) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=7)) / number * 1e9


def main() -> None:
    pm = ClientMetrics("producer", "p")
    cm = ClientMetrics("consumer", "c")
    node = pm.node(0)

    class Body:
        throttle_time_ms = 0
    body = Body()
    polled = {TopicPartition("t", i): [None] * 500 for i in range(4)}
    hooks = {
        "request sent (per request)": lambda: node.sent(1000),
        "bytes read (per socket read)": lambda: node.received(65536),
        "response (per request)": lambda: node.answered(0, 1.5, body),
        "batch sent (per batch)": lambda: pm.batch_sent("t", 1000, 60000, 60000, 0.002, True),
        "batch done (per batch)": lambda: pm.batch_done("t", 1000, 60000, False),
        "poll (per poll, 4 partitions)": lambda: cm.polled(1.0, 1.001, polled),
    }
    cost = {k: per_call(f) for k, f in hooks.items()}
    for k, v in cost.items():
        print(f"  {k:34s} {v:8.0f} ns")
    # E-produce: batch_size 1 MB, 116-byte records, 4 partitions -> a request carries up to
    # 4 batches of up to ~8,600 records; at linger 5 ms and ~500k records/s about 600 each
    recs_per_batch, batches = 600, 4
    produce = (cost["request sent (per request)"] + cost["response (per request)"]
               + batches * (cost["batch sent (per batch)"] + cost["batch done (per batch)"])
               + 2 * cost["bytes read (per socket read)"]) / (recs_per_batch * batches)
    consume = (cost["request sent (per request)"] + cost["response (per request)"]
               + 16 * cost["bytes read (per socket read)"] + cost["poll (per poll, 4 partitions)"]
               ) / 2000
    from kcodec.client.config import ProducerConfig
    from kcodec.client.producer.accumulator import RecordAccumulator

    loop = asyncio.new_event_loop()
    acc = RecordAccumulator(ProducerConfig(bootstrap_servers="127.0.0.1:1", linger_ms=5,
                                           batch_size=1_000_000, buffer_memory=1 << 34),
                            loop, lambda: None, False)
    from kcodec.client.producer.batch import RecordFuture
    acc.bind(RecordFuture, lambda *a: None)
    acc.counts["t"] = 4
    value = b"v" * 100
    send = per_call(lambda: acc.send("t", value, b"0123456789abcdef"), number=50000)
    print(f"\n  a keyed send into the accumulator   {send:8.0f} ns/record")
    print(f"  metrics hooks, E-produce            {produce:8.1f} ns/record "
          f"({produce / send * 100:.2f} % of a send)")
    print(f"  metrics hooks, E-consume            {consume:8.1f} ns/record")


if __name__ == "__main__":
    main()
