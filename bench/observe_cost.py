"""What observability costs: E-produce and E-consume with metrics off, metrics on (the
default), tracing on, and another checkout (main) as the baseline, interleaved round by round
on one Tansu broker.

    python -m bench.observe_cost [ROUNDS] [-n N] [--baseline /path/to/other/checkout]

Each side runs in its own worker process (this checkout's, or the baseline checkout's
interpreter and sources), so every side has a fresh client and the same CPU budget; the
order of the sides turns each round. A round produces N records (16-byte key, 100-byte
value, 4 partitions, linger 5 ms, acks=all, idempotent) to a fresh topic and then consumes
them (one consumer, assigned the 4 partitions, from the earliest offset); the worker times
each phase (the connection and the first record are made before the clock starts).

Tracing runs with the OpenTelemetry SDK's tracer provider and a span processor that drops
the spans (the cost of making them, not of exporting them), a span per record on both sides
(send, process), the consumer iterating (``for record in consumer``) as a traced consumer
must; the untraced sides iterate too, so the comparison is like for like.

Printed: per side the median and minimum seconds of each phase, records/s, and the ratio
to the baseline (main when given, else metrics off): > 1.00 is slower. Tracing's cost is
also given per record in microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

PARTITIONS = 4
VALUE = (b'{"event":"click","user":"u00042","page":"/a/b/c","tag":"' + b"7" * 100)[:100]
HERE = Path(__file__).resolve().parent.parent

WORKER = r'''
import json, sys, time
args = json.loads(sys.argv[1])
from kcodec.client import Consumer, Producer, TopicPartition
settings = dict(args["settings"])
if settings.pop("tracing", False):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanProcessor
    provider = TracerProvider()
    provider.add_span_processor(SpanProcessor())   # made, then dropped
    settings.update(tracing_enabled=True, tracer_provider=provider)
n, topic, value = args["n"], args["topic"], args["value"].encode()
p = Producer(bootstrap_servers=args["bootstrap"], linger_ms=5, acks="all",
             batch_size=1_000_000, **settings)
p.send(topic, value, b"0" * 16).result(30)
keys = [b"%016d" % i for i in range(n)]
t0, c0 = time.perf_counter(), time.process_time()
send = p.send
for k in keys[1:]:
    send(topic, value, k)
p.flush()
produce, produce_cpu = time.perf_counter() - t0, time.process_time() - c0
p.close()
c = Consumer(bootstrap_servers=args["bootstrap"], auto_offset_reset="earliest",
             max_poll_records=2000, **settings)
c.assign([TopicPartition(topic, i) for i in range(args["partitions"])])
got = 0
t0, c0 = time.perf_counter(), time.process_time()
for rec in c:
    got += 1
    if got >= n:
        break
consume, consume_cpu = time.perf_counter() - t0, time.process_time() - c0
c.close()
import kcodec
print(json.dumps({"produce": produce, "consume": consume, "produce_cpu": produce_cpu,
                  "consume_cpu": consume_cpu, "kcodec": kcodec.__file__}))
'''


def run_side(python: str, root: Path, bootstrap: str, n: int, settings: dict) -> dict:
    from kcodec.client import Admin

    topic = f"cost-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap_servers=bootstrap) as a:
        a.create_topics([topic], PARTITIONS, 1)
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([python, "-c", WORKER, json.dumps({
        "bootstrap": bootstrap, "topic": topic, "n": n, "value": VALUE.decode(),
        "partitions": PARTITIONS, "settings": settings})], env=env, cwd=root,
        capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rounds", nargs="?", type=int, default=7)
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--baseline", type=Path, help="another checkout (its .venv is used)")
    ap.add_argument("--trace-n", type=int, help="records for the tracing side (default N/20: "
                    "its spans cost tens of microseconds each)")
    args = ap.parse_args()
    from kcodec.testing.tansu import Tansu

    me = sys.executable
    sides: dict[str, tuple[str, Path, dict]] = {}
    if args.baseline is not None:
        base_py = args.baseline / ".venv" / "bin" / "python"
        sides["main"] = (str(base_py) if base_py.exists() else me, args.baseline, {})
    sides.update({
        "metrics off": (me, HERE, {"metrics_enabled": False}),
        "metrics on": (me, HERE, {}),
        "tracing on": (me, HERE, {"tracing": True}),
    })
    names = list(sides)
    count = {s: args.n for s in names}
    count["tracing on"] = args.trace_n or max(args.n // 20, 1000)
    keys = ("produce", "consume", "produce_cpu", "consume_cpu")
    times: dict[str, dict[str, list[float]]] = {s: {k: [] for k in keys} for s in names}
    with Tansu() as broker:
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for s in order:
                py, root, settings = sides[s]
                got = run_side(py, root, broker.bootstrap, count[s], settings)
                if r == 0:
                    print(f"  {s}: kcodec from {got['kcodec']}", flush=True)
                for k in keys:
                    times[s][k].append(got[k] / count[s])      # seconds per record
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                f"{s} {times[s]['produce'][-1] * count[s]:.2f}/"
                f"{times[s]['consume'][-1] * count[s]:.2f} s" for s in names), flush=True)
    base = names[0]
    print(f"\n{args.n} records ({count['tracing on']} traced), {args.rounds} rounds. Per side: "
          f"wall and CPU (this worker process, all threads) per record, medians; ratios to "
          f"{base} (> 1: slower) of the medians and, in brackets, the median of the "
          f"round-by-round ratios (each round's sides ran back to back)")
    for phase in ("produce", "consume"):
        print(f"\n{phase}:")
        for s in names:
            row = [f"  {s:12s}"]
            for k, what in ((phase, "wall"), (f"{phase}_cpu", "cpu")):
                mine, theirs = times[s][k], times[base][k]
                paired = statistics.median(a / b for a, b in zip(mine, theirs, strict=False))
                row.append(f"{what} {statistics.median(mine) * 1e6:6.2f} us/rec "
                           f"(min {min(mine) * 1e6:5.2f}) ratio "
                           f"{statistics.median(mine) / statistics.median(theirs):.3f} "
                           f"[{paired:.3f}]")
            if s == "tracing on":
                for k, what in ((phase, "wall"), (f"{phase}_cpu", "cpu")):
                    extra = statistics.median(times[s][k]) - statistics.median(
                        times["metrics on"][k])
                    row.append(f"tracing {what} {extra * 1e6:+.2f} us/rec")
            print("  ".join(row))

if __name__ == "__main__":
    main()
