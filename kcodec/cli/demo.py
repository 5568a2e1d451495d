"""``kcodec demo``: start a local broker and round-trip records with every codec.

Starts a kcodec broker (``kcodec.broker``, in this process) on a free loopback port -- or
uses ``--bootstrap`` -- then, for each compression codec, creates a 4-partition topic, produces
records with kcodec's Producer (idempotent, acks=all), reads them back with kcodec's
Consumer, checks that every key, value, header and timestamp came back unchanged, and
prints what it did and how fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kcodec.cli._client import UsageError, guarded, json_line, table

NAME = "demo"
HELP = "start a local kcodec broker and round-trip records with every codec"

EXAMPLES = [
    "kcodec demo",
    "kcodec demo -n 10000 -c zstd",
]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--records", type=int, default=20000,
                        help="records per codec (default 20000)")
    parser.add_argument("--bootstrap", "-b", metavar="HOST:PORT",
                        help="use this broker instead of starting a local one")
    parser.add_argument("-c", "--codec", action="append", choices=CODECS,
                        help="only this codec (repeatable; default: all five)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def _records(n: int, codec: str) -> list[tuple[bytes, bytes, list, int]]:
    base = 1_700_000_000_000
    out = []
    for i in range(n):
        key = b"%016x" % (i * 2654435761 % (1 << 64))
        value = (b'{"codec":"%s","i":%d,"pad":"' % (codec.encode(), i)).ljust(92, b"x") + b"%08x" % i + b'"}'
        out.append((key, value, [("seq", b"%d" % i)], base + i))
    return out


def _digest(items) -> str:
    import hashlib

    h = hashlib.sha256()
    for k, v, hs, ts in sorted(items):
        h.update(k + b"\0" + v + b"\0" + repr(hs).encode() + b"%d" % ts)
    return h.hexdigest()[:16]


def _say(args: argparse.Namespace, msg: str) -> None:
    if not args.json:
        print(msg, flush=True)


def start_broker() -> Any:
    """The demo's local broker: a kcodec broker node in this process (memory storage),
    started, with ``.bootstrap`` and ``.stop()``."""
    from kcodec.broker import Cluster

    return Cluster(1, num_partitions=4).start()


@guarded
def run(args: argparse.Namespace) -> int:
    if args.records < 1:
        raise UsageError(f"--records must be positive, got {args.records}")
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        _say(args, "starting a local kcodec broker (in this process, memory storage) ...")
        t0 = time.monotonic()
        try:
            broker = start_broker()
        except OSError as exc:
            print(f"kcodec demo: error: cannot start the broker: {exc}", file=sys.stderr)
            return 1
        bootstrap = broker.bootstrap
        _say(args, f"broker ready on {bootstrap} in {time.monotonic() - t0:.2f} s")
    try:
        return _round_trips(args, bootstrap)
    finally:
        if broker is not None:
            broker.stop()
            _say(args, "broker stopped")


def _round_trips(args: argparse.Namespace, bootstrap: str) -> int:
    import uuid

    from kcodec import IMPLEMENTATION
    from kcodec.client import Admin, Consumer, NewTopic, Producer, TopicPartition

    _say(args, f"kcodec implementation: {IMPLEMENTATION}; {args.records} records per codec "
               "(16-byte key, 100-byte value, 1 header), 4 partitions, acks=all, idempotent\n")
    rows = []
    failed = 0
    cfg: dict[str, Any] = {"bootstrap_servers": bootstrap, "client_id": "kcodec-demo"}
    admin = Admin(**cfg)
    try:
        for codec in args.codec or CODECS:
            topic = f"kcodec-demo-{codec}-{uuid.uuid4().hex[:6]}"
            # retention.ms=-1: the records carry 2023 timestamps, which time retention
            # (7 days by default, as in Kafka) would delete in the middle of the demo
            err = admin.create_topics([NewTopic(topic, 4, configs={"retention.ms": "-1"})])[topic]
            if err is not None:
                raise err
            recs = _records(args.records, codec)
            t0 = time.perf_counter()
            with Producer(compression_type=codec, linger_ms=5, **cfg) as p:
                for k, v, hs, ts in recs:
                    p.send(topic, v, key=k, headers=hs, timestamp=ts)
                p.flush()
            t_prod = time.perf_counter() - t0
            got: list[tuple] = []
            t0 = time.perf_counter()
            with Consumer(auto_offset_reset="earliest", fetch_max_wait_ms=100, **cfg) as c:
                c.assign([TopicPartition(topic, i) for i in range(4)])
                deadline = time.monotonic() + 60
                while len(got) < len(recs) and time.monotonic() < deadline:
                    for _tp, rs in c.poll(0.5).items():
                        got += [(r.key, r.value, [(hk, hv) for hk, hv in r.headers], r.timestamp)
                                for r in rs]
            t_cons = time.perf_counter() - t0
            ok = len(got) == len(recs) and _digest(got) == _digest(recs)
            failed += not ok
            admin.delete_topics([topic])
            row = {"codec": codec, "records": len(recs), "received": len(got),
                   "produce_msgs_per_s": round(len(recs) / t_prod),
                   "consume_msgs_per_s": round(len(got) / t_cons) if t_cons else 0,
                   "ok": ok}
            rows.append(row)
            if args.json:
                json_line(row)
            else:
                print(f"  {codec:<6}  produced {len(recs)} in {t_prod:.2f} s, consumed {len(got)} "
                      f"in {t_cons:.2f} s: {'identical' if ok else 'MISMATCH'}", flush=True)
    finally:
        admin.close()
    if not args.json:
        print()
        table(["codec", "records", "produce msg/s", "consume msg/s", "round trip"],
              [(r["codec"], r["records"], r["produce_msgs_per_s"], r["consume_msgs_per_s"],
                "ok" if r["ok"] else "FAILED") for r in rows])
    return 1 if failed else 0
