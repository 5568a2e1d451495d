"""``kcodec produce``: send messages (arguments, or lines of stdin) to a topic."""

from __future__ import annotations

import argparse
import sys

from kcodec.cli._client import UsageError, add_connection, client_config, guarded, json_line
from kcodec.client.config import COMPRESSION_TYPES

NAME = "produce"
HELP = "send messages to a topic (arguments, or one per line of stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", help="topic to write to (required)")
    parser.add_argument("-p", "--partition", type=int, help="partition (default: by key, or sticky)")
    parser.add_argument("-k", "--key", help="key of every message")
    parser.add_argument("-c", "--compression", default="none",
                        help=f"compression codec: {', '.join(COMPRESSION_TYPES)} (default none)")
    parser.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                        help="a header on every message (repeatable)")
    parser.add_argument("--acks", default="all", help="0, 1 or all (default all)")
    parser.add_argument("messages", nargs="*", metavar="MESSAGE",
                        help="messages to send; none: read lines from stdin")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Producer

    if not args.topic:
        raise UsageError("a topic is required (-t TOPIC)")
    if args.compression not in COMPRESSION_TYPES:
        raise UsageError(f"unknown compression codec {args.compression!r} "
                         f"(choose from {', '.join(COMPRESSION_TYPES)})")
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"partition must be non-negative, got {args.partition}")
    if args.partition is not None and args.key is not None:
        raise UsageError("give either -p PARTITION or -k KEY, not both")
    headers = []
    for h in args.header:
        k, sep, v = h.partition("=")
        if not sep or not k:
            raise UsageError(f"header {h!r} is not KEY=VALUE")
        headers.append((k, v.encode()))
    acks = args.acks
    cfg = client_config(args, compression_type=args.compression, acks=acks,
                        enable_idempotence=acks in ("all", "-1"), linger_ms=5)
    key = args.key.encode() if args.key is not None else None
    source = args.messages if args.messages else (line.rstrip("\n") for line in sys.stdin)
    with Producer(**cfg) as producer:
        pending = []
        for msg in source:
            fut = producer.send(args.topic, msg.encode(), key=key, partition=args.partition,
                                headers=headers or None)
            pending.append(fut)
            if len(pending) >= 1000:
                _report(args, pending)
                pending = []
        _report(args, pending)
    return 0


def _report(args: argparse.Namespace, futs: list) -> None:
    for f in futs:
        r = f.result(args.timeout)
        if args.json:
            json_line({"topic": args.topic, "partition": r.partition, "offset": r.offset,
                       "timestamp": r.timestamp})
        else:
            print(f"partition {r.partition} offset {r.offset}", flush=True)
