"""``kcodec consume``: print the records of a topic."""

from __future__ import annotations

import argparse
import time

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    show,
    text,
)

NAME = "consume"
HELP = "print records of a topic (as a group member with -g)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", help="topic to read (required)")
    parser.add_argument("-g", "--group", help="consumer group (commits its offsets)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest offset when there is no committed one")
    parser.add_argument("-n", "--count", type=int, help="stop after this many records")
    parser.add_argument("--idle", type=float, metavar="SECONDS",
                        help="stop when no record came for this long")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin, Consumer, TopicPartition

    if not args.topic:
        raise UsageError("a topic is required (-t TOPIC)")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be positive, got {args.count}")
    cfg = client_config(args, auto_offset_reset="earliest" if args.from_beginning else "latest",
                        fetch_max_wait_ms=100)
    if args.group:
        cfg.update(group_id=args.group, session_timeout_ms=10000, heartbeat_interval_ms=1000)
    else:
        with Admin(**client_config(args)) as admin:
            md = admin.describe_cluster([args.topic])
        parts = [TopicPartition(args.topic, p.partition) for p in md.topics[0].partitions]
    n = 0
    last = time.monotonic()
    with Consumer(**cfg) as c:
        if args.group:
            c.subscribe([args.topic])
        else:
            c.assign(parts)
        while args.count is None or n < args.count:
            batch = c.poll(0.2, max_records=None if args.count is None else args.count - n)
            if not batch:
                if args.idle is not None and time.monotonic() - last > args.idle:
                    break
                continue
            last = time.monotonic()
            for tp, recs in sorted(batch.items()):
                for r in recs:
                    _print(args, tp, r)
                    n += 1
        if args.group:
            c.commit()
    return 0


def _print(args: argparse.Namespace, tp, r) -> None:
    if args.json:
        json_line({"topic": tp.topic, "partition": tp.partition, "offset": r.offset,
                   "timestamp": r.timestamp, "key": text(r.key), "value": text(r.value),
                   "headers": [[k, text(v)] for k, v in r.headers]})
    else:
        key = "" if r.key is None else f" key={show(r.key)}"
        print(f"{tp.partition}:{r.offset}{key} {show(r.value)}", flush=True)
